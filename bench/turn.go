package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// turn is a turn started through the client, as every client starts one
// (client.Run: it subscribes to what the input causes, then publishes it),
// and when.
type turn struct {
	t *client.Turn
	// sent is when client.Run was called; stored when it returned: the input
	// was in TAH_IN.
	sent, stored time.Time
}

// outcome is a turn's outcome and when the client had it.
type outcome struct {
	wire.Outcome
	at time.Time
}

// startTurn runs input in (its Text; ID, when set) on session sid.
func startTurn(ctx context.Context, cl *client.Client, sid string, in wire.Input) (*turn, error) {
	sent := time.Now()
	t, err := cl.Run(ctx, sid, in)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", sid, err)
	}
	return &turn{t: t, sent: sent, stored: time.Now()}, nil
}

// wait waits for the turn's outcome and closes the Turn. An outcome that is
// not a completed turn is an error, which comes with it.
func (t *turn) wait(ctx context.Context) (outcome, error) {
	defer t.t.Close()
	o, err := t.t.Outcome(ctx)
	at := time.Now()
	if err != nil {
		return outcome{o, at}, fmt.Errorf("turn of %s (input %s): %w", t.t.Session(), t.t.InputID(), err)
	}
	if o.Failure != "" || o.Status != projection.StatusCompleted {
		return outcome{o, at}, fmt.Errorf("turn of %s (input %s): status %s %s %s", t.t.Session(), t.t.InputID(), o.Status, o.Failure, o.Error)
	}
	return outcome{o, at}, nil
}

// runTurn runs one turn of sid with text and waits for its outcome.
func runTurn(ctx context.Context, cl *client.Client, sid, text string) (*turn, outcome, error) {
	t, err := startTurn(ctx, cl, sid, wire.Input{Text: text})
	if err != nil {
		return nil, outcome{}, err
	}
	o, err := t.wait(ctx)
	return t, o, err
}

// readLog reads session sid's events from stream sequence from on through
// the client (the API's events endpoint, a page at a time).
func readLog(ctx context.Context, cl *client.Client, sid string, from uint64) ([]event.Event, error) {
	var evs []event.Event
	for ev, err := range cl.Log(ctx, sid, from) {
		if err != nil {
			return nil, fmt.Errorf("the log of %s: %w", sid, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
