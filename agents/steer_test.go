package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// steerable answers a steer with it ("Steered: ..."), a tool result with
// "no steer", and a prompt with "Answer to ..."; the prompts in hold are
// held until their channel is closed (called tells the prompt as it
// comes), and "a long task" asks for a tool first.
type steerable struct {
	called chan string
	hold   map[string]chan struct{}
}

func (p *steerable) Name() string { return "steerable" }

func (p *steerable) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Steer:
		return llm.Response{Content: "Steered: " + last.Content, FinishReason: llm.FinishStop}, nil
	case last.Role == llm.RoleTool:
		return llm.Response{Content: "no steer", FinishReason: llm.FinishStop}, nil
	}
	if release, ok := p.hold[last.Content]; ok {
		p.called <- last.Content
		select {
		case <-release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	if last.Content == "a long task" {
		return llm.Response{FinishReason: llm.FinishToolCalls,
			ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "no_such_tool", Arguments: json.RawMessage(`{}`)}}}, nil
	}
	return llm.Response{Content: "Answer to " + last.Content, FinishReason: llm.FinishStop}, nil
}

// called waits until the model holds prompt.
func (p *steerable) wait(t *testing.T, prompt string) {
	t.Helper()
	select {
	case got := <-p.called:
		if got != prompt {
			t.Fatalf("the model was asked %q, want %q", got, prompt)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the model was never asked %q", prompt)
	}
}

// inputsStored is TAH_IN's last sequence: what storedAfter waits past.
func inputsStored(t *testing.T, c *tahtest.Cluster) uint64 {
	t.Helper()
	s, err := c.Bus().JetStream().Stream(context.Background(), wire.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// storedAfter waits until TAH_IN holds an input past seq: the gateway
// answers a prompt's ack before it stores the input (the node streams on
// the same subject), so an ack alone does not say it is stored.
func storedAfter(t *testing.T, c *tahtest.Cluster, seq uint64) {
	t.Helper()
	err := natstest.Poll(time.Minute, 5*time.Millisecond, func() error {
		s, err := c.Bus().JetStream().Stream(context.Background(), wire.InputStream)
		if err != nil {
			return err
		}
		if last := s.CachedInfo().State.LastSeq; last <= seq {
			return fmt.Errorf("%s ends at %d, the steer not stored past %d", wire.InputStream, last, seq)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the steer was never stored: %v", err)
	}
}

// barrier returns once the node took every input of sid stored before it:
// a cancel that names no input there is answered at once, after them (one
// session's inputs are taken in order).
func barrier(t *testing.T, c *tahtest.Cluster, sid string) {
	t.Helper()
	nc := c.Bus().Conn()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if _, err := c.Bus().PublishInput(context.Background(), sid, wire.Input{Command: wire.CommandCancel, InputID: "in_barrier", ReplyTo: inbox}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(time.Minute); err != nil {
		t.Fatalf("the barrier's cancel got no outcome: %v", err)
	}
}

// readUntil reads a stream's chunks up to the status token want.
func readUntil(t *testing.T, sub *nats.Subscription, want string) {
	t.Helper()
	for {
		m, err := sub.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("no %q status: %v", want, err)
		}
		var ch wire.Chunk
		if json.Unmarshal(m.Data, &ch) == nil && ch.Type == wire.ChunkStatus && ch.Data == want {
			return
		}
	}
}

// sessionFrom reads a controller's stream up to the status that names its
// session.
func sessionFrom(t *testing.T, sub *nats.Subscription) string {
	t.Helper()
	for {
		m, err := sub.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("no session status: %v", err)
		}
		var ch wire.Chunk
		_ = json.Unmarshal(m.Data, &ch)
		if s, ok := ch.Data.(string); ok && strings.HasPrefix(s, wire.StatusSessionPrefix) {
			return strings.TrimPrefix(s, wire.StatusSessionPrefix)
		}
	}
}

// TestSteerAndInterrupt: a prompt with "when_busy": "steer" to a session
// whose turn runs joins it: its stream says "steered", then carries the
// turn's answer from there and the terminator, the first caller's stream
// gets the same answer, and the log holds one turn with the steer. A prompt
// with "when_busy": "interrupt" cancels the running turn (its caller hears
// "cancelled") and runs next; an unknown when_busy is a 400.
func TestSteerAndInterrupt(t *testing.T) {
	release := make(chan struct{})
	model := &steerable{called: make(chan string, 4), hold: map[string]chan struct{}{
		"a long task": release, "another long task": make(chan struct{})}}
	c := one(t, model, nil)
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	ctrl := wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController)

	bad := stream(t, nc, ctrl, []byte(`{"prompt":"p","when_busy":"queue"}`))
	if status, e := errorOf(bad); status != "400" || e.Error != wire.AgentErrBadRequest {
		t.Fatalf("when_busy queue: %+v", bad)
	}

	inbox := nc.NewRespInbox()
	first, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(ctrl, inbox, []byte("a long task")); err != nil {
		t.Fatal(err)
	}
	sid := sessionFrom(t, first)
	model.wait(t, "a long task")

	steerInbox := nc.NewRespInbox()
	steer, err := nc.SubscribeSync(steerInbox)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"prompt": "go left", "session": sid, "when_busy": "steer"})
	before := inputsStored(t, c)
	if err := nc.PublishRequest(ctrl, steerInbox, req); err != nil {
		t.Fatal(err)
	}
	// The steer is stored after its ack; then the barrier: the node took it.
	readUntil(t, steer, wire.StatusAck)
	storedAfter(t, c, before)
	barrier(t, c, sid)
	close(release)

	steered := readStream(t, steer)
	if got := text(steered); got != "Steered: go left" || !slices.Contains(statuses(steered), wire.StatusSteered) {
		t.Fatalf("the steer's stream: %q %+v", got, steered)
	}
	if got := text(readStream(t, first)); got != "Steered: go left" {
		t.Fatalf("the first stream: %q", got)
	}
	evs, err := c.Log(sid)
	if err != nil {
		t.Fatal(err)
	}
	turns, steers := 0, 0
	for _, ev := range evs {
		switch ev.Type {
		case event.TurnStarted:
			turns++
		case event.TurnSteered:
			steers++
		}
	}
	if turns != 1 || steers != 1 {
		t.Fatalf("%d turns, %d steers in the log", turns, steers)
	}

	// An interrupt of a turn that runs: it is cancelled, and the
	// interrupt's prompt runs next.
	held, err := nc.SubscribeSync(inbox + ".2")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(wire.AgentSubject(wire.AgentVerbPrompt, "tah", sid), inbox+".2", []byte("another long task")); err != nil {
		t.Fatal(err)
	}
	model.wait(t, "another long task")
	req, _ = json.Marshal(map[string]any{"prompt": "stop that", "session": sid, "when_busy": "interrupt"})
	if got := text(stream(t, nc, ctrl, req)); got != "Answer to stop that" {
		t.Fatalf("the interrupt's stream: %q", got)
	}
	if ms := readStream(t, held); !slices.Contains(statuses(ms), wire.StatusCancelled) {
		t.Fatalf("the interrupted stream: %+v", ms)
	}
	if r := c.Audit(sid); len(r.Problems) > 0 {
		t.Fatalf("audit: %v", r.Problems)
	}
}
