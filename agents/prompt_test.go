package agents_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// errorOf is the status code and body of a stream's error message, or "".
func errorOf(ms []msg) (string, wire.AgentError) {
	for _, m := range ms {
		if m.status != "" {
			var e wire.AgentError
			_ = json.Unmarshal([]byte(m.body), &e)
			return m.status, e
		}
	}
	return "", wire.AgentError{}
}

// TestBadRequests: every malformed prompt gets 400 (and nothing else than
// the error and the terminator: no ack), an unknown session 404, and none
// of them starts a turn.
func TestBadRequests(t *testing.T) {
	c := one(t, mock.Scripted(mock.Say("never").Always()), func(cfg *config.Config) { cfg.Agent.MaxInputBytes = 1000 })
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	ctrl := wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, req, status, code, says string
	}{
		{"empty", "", "400", wire.AgentErrBadRequest, "empty"},
		{"not JSON", "{nope", "400", wire.AgentErrBadRequest, "not a JSON object"},
		{"no prompt", `{"x":1}`, "400", wire.AgentErrBadRequest, `no "prompt"`},
		{"empty prompt", `{"prompt":""}`, "400", wire.AgentErrBadRequest, "non-empty"},
		{"prompt not a string", `{"prompt":3}`, "400", wire.AgentErrBadRequest, "wrong types"},
		{"bad base64", `{"prompt":"p","attachments":[{"filename":"a.txt","content":"%%%"}]}`, "400", wire.AgentErrBadRequest, "base64"},
		{"url-safe base64", `{"prompt":"p","attachments":[{"filename":"a.txt","content":"` + base64.URLEncoding.EncodeToString([]byte{0xfb, 0xff}) + `"}]}`, "400", wire.AgentErrBadRequest, "base64"},
		{"whitespace in base64", `{"prompt":"p","attachments":[{"filename":"a.txt","content":"aGVs\nbG8="}]}`, "400", wire.AgentErrBadRequest, "whitespace"},
		{"no filename", `{"prompt":"p","attachments":[{"content":"` + b64("x") + `"}]}`, "400", wire.AgentErrBadRequest, "no filename"},
		{"binary attachment", `{"prompt":"p","attachments":[{"filename":"a.bin","content":"` + b64("\x00\x01\x02") + `"}]}`, "400", wire.AgentErrBadRequest, "binary"},
		{"over the input limit", strings.Repeat("x", 1001), "400", wire.AgentErrTooLarge, "over this agent's limit of 1000 bytes"},
		{"unknown session", `{"prompt":"p","session":"s_00000000000000000000"}`, "404", wire.AgentErrNotFound, "not found"},
		{"invalid session", `{"prompt":"p","session":"no.such"}`, "404", wire.AgentErrNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := stream(t, nc, ctrl, []byte(tc.req))
			status, e := errorOf(ms)
			if status != tc.status || e.Error != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("got %s %+v, want %s %s saying %q", status, e, tc.status, tc.code, tc.says)
			}
			if len(ms) != 2 || !ms[1].end {
				t.Fatalf("want the error and the terminator only, got %+v", ms)
			}
		})
	}
}

// gated holds the model's first call until release is closed, and closes
// called when it comes: a test waits on the turn it needs running, not on
// time.
type gated struct {
	*mock.Provider
	called, release chan struct{}
	first           atomic.Bool
}

func (g *gated) wait(ctx context.Context) error {
	if !g.first.CompareAndSwap(false, true) {
		return nil
	}
	close(g.called)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := g.wait(ctx); err != nil {
		return llm.Response{}, err
	}
	return g.Provider.Generate(ctx, req)
}

func (g *gated) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	if err := g.wait(ctx); err != nil {
		return llm.Response{}, err
	}
	return g.Provider.Stream(ctx, req, onDelta)
}

// TestBusy: a prompt to a session that runs a turn gets the ack, then 409,
// then the terminator; the running turn's stream is unharmed.
func TestBusy(t *testing.T) {
	model := &gated{Provider: mock.Scripted(mock.Say("Slow answer.").OnTurn(1), mock.Say("Next.").Always()),
		called: make(chan struct{}), release: make(chan struct{})}
	c := one(t, model, nil)
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	// The first turn, read up to its session's id.
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), inbox, []byte("first")); err != nil {
		t.Fatal(err)
	}
	var sid string
	for sid == "" {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var ch wire.Chunk
		_ = json.Unmarshal(m.Data, &ch)
		if s, ok := ch.Data.(string); ok && strings.HasPrefix(s, wire.StatusSessionPrefix) {
			sid = strings.TrimPrefix(s, wire.StatusSessionPrefix)
		}
	}
	// The first turn is running (its model call has come) before the second
	// prompt: on a busy machine the second could otherwise be stored first.
	select {
	case <-model.called:
	case <-time.After(time.Minute):
		t.Fatal("the first turn never asked the model")
	}
	busy := stream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), []byte(`{"prompt":"second","session":"`+sid+`"}`))
	close(model.release)
	status, e := errorOf(busy)
	if statuses(busy)[0] != wire.StatusAck || status != "409" || e.Error != wire.FailureBusy || !busy[len(busy)-1].end {
		t.Fatalf("busy: %+v", busy)
	}
	first := readStream(t, sub)
	if text(first) != "Slow answer." {
		t.Fatalf("first turn: %+v", first)
	}
	// Idle again: the session takes the next prompt.
	if got := text(stream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, "tah", sid), []byte("third"))); got != "Next." {
		t.Fatalf("third: %q", got)
	}
}

// TestAttachments: text attachments become part of the turn's user
// message, each in an attachment element, after the prompt.
func TestAttachments(t *testing.T) {
	c := one(t, mock.Scripted(mock.Say("Read them.").Always()), nil)
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	req, _ := json.Marshal(map[string]any{"prompt": "summarize", "unknown": true, "attachments": []map[string]any{
		{"filename": "notes.md", "content": base64.StdEncoding.EncodeToString([]byte("# Notes\nall good")), "extra": 1},
		{"filename": "b.txt", "content": base64.StdEncoding.EncodeToString([]byte("second"))},
	}})
	ms := stream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), req)
	if text(ms) != "Read them." {
		t.Fatalf("%+v", ms)
	}
	evs, err := c.Log(sessionOf(t, ms))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == event.TurnStarted {
			d, _ := event.DecodeAs[event.TurnStartedData](ev)
			want := "summarize\n\n<attachment filename=\"notes.md\">\n# Notes\nall good\n</attachment>\n\n<attachment filename=\"b.txt\">\nsecond\n</attachment>"
			if d.Message.Content != want || d.Caller == nil || d.Caller.Protocol != wire.ReplyAgents {
				t.Fatalf("turn.started %+v", d)
			}
			return
		}
	}
	t.Fatal("no turn.started")
}
