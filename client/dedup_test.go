package client_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestInputIDsAreDeduplicatedPerSession: two sessions given inputs of the
// same id within the stream's duplicate window both run (TAH_IN's
// de-duplication is stream-wide: the message id carries the session), and
// the same id sent twice to one session is stored, and run, once.
func TestInputIDsAreDeduplicatedPerSession(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("ok").Always()))
	c := connect(t, n)
	a, b := newSession(t, c), newSession(t, c)
	const id = "in_load_probe_1"
	for _, sid := range []string{a, b} {
		turn, err := c.Run(ctx, sid, wire.Input{ID: id, Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := turn.Outcome(ctx)
		turn.Close()
		if err != nil || o.Status != "completed" || o.InputID != id || o.Turn != 1 {
			t.Fatalf("session %s, input %s: %+v %v", sid, id, o, err)
		}
	}
	// The same id again to session a: a duplicate, stored once.
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, a, wire.Input{ID: "in_twice", Command: wire.CommandResume}); err != nil {
		t.Fatal(err)
	}
	in, err := js.Stream(ctx, wire.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	before, err := in.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, a, wire.Input{ID: "in_twice", Command: wire.CommandResume}); err != nil {
		t.Fatal(err)
	}
	after, err := in.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.LastSeq != before.State.LastSeq {
		t.Fatalf("the same input id sent twice to one session was stored twice (last sequence %d, then %d)",
			before.State.LastSeq, after.State.LastSeq)
	}
}
