package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// approvalCluster runs a model that asks to write a file, which waits for
// approval (write_file: always), then answers.
func approvalCluster(t *testing.T) *clusterCaller {
	c := oneWith(t, mock.Scripted(mock.CallTool("write_file", `{"path":"out.txt","content":"hi"}`).OnCall(1), mock.Say("Done.").Always()),
		func(cfg *config.Config) { cfg.Tools.Write = true }, func(o *node.Options) { o.AgentKeepAlive = 200 * time.Millisecond })
	return &clusterCaller{c: c, nc: caller(t, c, 0, wire.RoleClient, "alice")}
}

// TestQueryApproved: a call that needs approval is a query chunk whose
// reply subject is a stored TAH subject; "yes" there approves it, and the
// same stream goes on to the answer and the terminator.
func TestQueryApproved(t *testing.T) {
	cc := approvalCluster(t)
	sub, q := cc.promptUntilQuery(t, "write it")
	if !strings.Contains(q.Prompt, "write_file") || !strings.Contains(q.Prompt, `"path":"out.txt"`) || q.ID == "" {
		t.Fatalf("query %+v", q)
	}
	// While the call waits, the stream hears that it waits: a caller's
	// inactivity timeout does not end it.
	if m, err := sub.NextMsg(30 * time.Second); err != nil || !strings.Contains(string(m.Data), wire.StatusAwaitingApproval) {
		t.Fatalf("no keep-alive while waiting: %v", err)
	}
	if err := cc.nc.Publish(q.ReplySubject, []byte("yes")); err != nil {
		t.Fatal(err)
	}
	rest := readStream(t, sub)
	if text(rest) != "Done." || !rest[len(rest)-1].end {
		t.Fatalf("after the answer: %+v", rest)
	}
	if b, err := os.ReadFile(filepath.Join(cc.c.ToolsRoot(), "out.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("the approved call did not write: %q %v", b, err)
	}
}

// TestQueryDenied: any other answer denies the call and is told to the
// model; the turn goes on.
func TestQueryDenied(t *testing.T) {
	cc := approvalCluster(t)
	sub, q := cc.promptUntilQuery(t, "write it")
	if err := cc.nc.Publish(q.ReplySubject, []byte(`{"prompt":"not there, use notes.txt"}`)); err != nil {
		t.Fatal(err)
	}
	rest := readStream(t, sub)
	if text(rest) != "Done." {
		t.Fatalf("after the answer: %+v", rest)
	}
	if _, err := os.Stat(filepath.Join(cc.c.ToolsRoot(), "out.txt")); err == nil {
		t.Fatal("a denied call wrote")
	}
	evs, err := cc.c.Log(cc.sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == event.ToolDenied {
			if !strings.Contains(string(ev.Data), "not there, use notes.txt") {
				t.Fatalf("tool.denied %s", ev.Data)
			}
			return
		}
	}
	t.Fatal("no tool.denied")
}

type clusterCaller struct {
	c interface {
		ToolsRoot() string
		Log(string) ([]event.Event, error)
	}
	nc  *nats.Conn
	sid string
}

// promptUntilQuery prompts the controller and reads the stream up to the
// status that follows its query chunk, and returns the subscription.
func (cc *clusterCaller) promptUntilQuery(t *testing.T, prompt string) (*nats.Subscription, wire.Query) {
	t.Helper()
	return cc.promptUntilQueryOn(t, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), prompt)
}

// promptUntilQueryOn is promptUntilQuery of the controller on subject ctrl.
func (cc *clusterCaller) promptUntilQueryOn(t *testing.T, ctrl, prompt string) (*nats.Subscription, wire.Query) {
	t.Helper()
	inbox := cc.nc.NewRespInbox()
	sub, err := cc.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := cc.nc.PublishRequest(ctrl, inbox, []byte(prompt)); err != nil {
		t.Fatal(err)
	}
	var q *wire.Query
	for {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("no query: %v", err)
		}
		var ch struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &ch); err != nil {
			t.Fatalf("%q: %v", m.Data, err)
		}
		var s string
		_ = json.Unmarshal(ch.Data, &s)
		switch {
		case ch.Type == wire.ChunkQuery:
			q = new(wire.Query)
			if err := json.Unmarshal(ch.Data, q); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(s, wire.StatusSessionPrefix):
			cc.sid = strings.TrimPrefix(s, wire.StatusSessionPrefix)
		case s == wire.StatusAwaitingApproval:
			if q == nil {
				t.Fatal("awaiting_approval without a query")
			}
			return sub, *q
		}
	}
}

// TestHostileAnswers: answers to a call decided already, to a call that
// does not exist, under a subject that names no call, or too large, change
// nothing: each is taken off the answers' stream (or refused by it), and
// the session's log stays as the turn left it.
func TestHostileAnswers(t *testing.T) {
	cc := approvalCluster(t)
	sub, q := cc.promptUntilQuery(t, "write it")
	if err := cc.nc.Publish(q.ReplySubject, []byte("yes")); err != nil {
		t.Fatal(err)
	}
	readStream(t, sub)
	c := cc.c.(*tahtest.Cluster)
	k := wire.Shard(cc.sid, c.Bus().Shards())
	before := lastSeq(t, c, k)
	for subj, data := range map[string][]byte{
		q.ReplySubject:                          []byte("no"),
		wire.AnswerSubject(cc.sid, "call_none"): []byte("yes"),
		"tah.sess." + cc.sid + ".answer.=%%%":   []byte("yes"),
		wire.AnswerSubject(cc.sid, "call_big"):  []byte(strings.Repeat("x", 128<<10)),
	} {
		if err := cc.nc.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	js := c.Bus().JetStream()
	err := natstest.Poll(30*time.Second, 50*time.Millisecond, func() error {
		for _, name := range []string{wire.AnswerStream, wire.InputStream} {
			s, err := js.Stream(context.Background(), name)
			if err != nil {
				return err
			}
			info, err := s.Info(context.Background())
			if err != nil {
				return err
			}
			if info.State.Msgs > 0 {
				return fmt.Errorf("%s holds %d messages", name, info.State.Msgs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := lastSeq(t, c, k); after != before {
		t.Fatalf("the session's log moved from %d to %d", before, after)
	}
}
