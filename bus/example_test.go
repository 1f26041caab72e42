package bus_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// A node's view of a session's log: open the bus (here an embedded server on a
// random port), claim the session with a fenced writer, append, read back.
// One Append is one record: its events share a sequence.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "tah-example")
	defer os.RemoveAll(dir)

	cfg := bus.Default()
	cfg.DataDir, cfg.Port = dir, -1
	b, err := bus.Open(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(ctx)

	sid := "s_example"
	last, _ := b.LastSeq(ctx, sid) // 0: a new session
	w, _ := b.Writer(sid, 1, last)
	_, err = w.Append(ctx,
		event.MustNew(sid, event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "node-a", Config: event.Config{MaxSteps: 20}}),
		event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("hello")}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}

	// A second owner at the same point is fenced.
	stale, _ := b.Writer(sid, 2, last)
	_, err = stale.Append(ctx, event.MustNew(sid, event.SessionClaimed, event.SessionClaimedData{Epoch: 2, Node: "node-b", Config: event.Config{MaxSteps: 20}}))
	fmt.Println("stale writer fenced:", errors.Is(err, bus.ErrFenced))

	evs, lastSeq, _ := b.Replay(ctx, sid, 0)
	for _, ev := range evs {
		fmt.Println(ev.Seq, ev.Index, ev.Type, ev.Epoch)
	}
	fmt.Println("last:", lastSeq)
	// Output:
	// stale writer fenced: true
	// 1 0 session.claimed 1
	// 1 1 turn.started 1
	// last: 1
}
