package session

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// A command with nothing to do, taken by a node that loads the session
// afresh (a restart, another owner, a passivated actor), is answered from
// the log and writes nothing to it: no session.claimed. A command with work
// claims the session as before.
func TestNothingToDoWritesNothing(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.Say("ok").Always())
	first := newManager(t, b, p, Config{})
	sid := event.NewID("s")
	if _, err := Create(context.Background(), b, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	done := run("hello")
	if o := do(t, first, sid, done); o.Err != nil {
		t.Fatal(o.Err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := types(t, b, sid)

	// Each command on a manager of its own: each loads the session afresh.
	for _, cmd := range []Command{
		{Kind: wire.CommandResume},
		{Kind: wire.CommandCancel, Reason: "stop"},
		{Kind: wire.CommandCancel, Target: "in_elsewhere"},
		done, // the redelivery of an input whose turn ended
	} {
		m := newManager(t, b, p, Config{})
		o := do(t, m, sid, cmd)
		if cmd.Kind == wire.CommandResume && !errors.Is(o.Err, ErrNothingToResume) {
			t.Errorf("resume of an idle session: %v, want ErrNothingToResume", o.Err)
		}
		if cmd.Kind != wire.CommandResume && o.Err != nil {
			t.Errorf("%s: %v", cmd.Kind, o.Err)
		}
		if after := types(t, b, sid); !slices.Equal(after, before) {
			t.Fatalf("%s %s wrote to the log: %v, was %v", cmd.Kind, cmd.Target, after[len(before):], before)
		}
	}

	// Work claims as before.
	m := newManager(t, b, p, Config{})
	if o := do(t, m, sid, run("again")); o.Err != nil {
		t.Fatal(o.Err)
	}
	after := types(t, b, sid)
	if len(after) <= len(before) || after[len(before)] != event.SessionClaimed {
		t.Fatalf("a run after a load wrote %v, want session.claimed first", after[len(before):])
	}
}
