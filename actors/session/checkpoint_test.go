package session

import (
	"context"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
)

// A session loaded afresh for every turn (its owner changes, or it
// passivates between short turns) still gets a checkpoint every
// CheckpointEvery events: the count runs from the checkpoint the load read,
// not from the load, which would start it again at every load and never
// reach it.
func TestCheckpointsCountFromTheLastCheckpointNotTheLoad(t *testing.T) {
	b := openBus(t)
	const sid = "s1"
	if _, err := Create(context.Background(), b, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	const turns = 6
	for i := range turns {
		cfg := Config{CheckpointEvery: 8, Logger: quiet}
		m, err := NewManager(cfg, b, mock.Scripted(mock.Say("ok")), (&testTools{}).config(), nil)
		if err != nil {
			t.Fatal(err)
		}
		o := do(t, m, sid, run("turn"))
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if o.Err != nil || o.Status != projection.StatusCompleted {
			t.Fatalf("turn %d: %+v", i+1, o)
		}
	}
	st := fold(t, b, sid)
	cps := events[event.CheckpointCreatedData](t, b, sid, event.CheckpointCreated)
	// Each turn appends fewer than 8 events after its claim, and together
	// far more: at least one checkpoint every 8 of them.
	if want := st.Events / 8 / 2; len(cps) < want || len(cps) == 0 {
		t.Fatalf("%d checkpoints over %d events in %d turns, each on a fresh load; want at least %d", len(cps), st.Events, turns, max(want, 1))
	}
}
