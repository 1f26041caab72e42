package projection

import (
	"errors"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// ownedLog is a log as its owners write it: created at epoch 0, then claimed
// at epoch 1, whose events carry it.
func ownedLog(t *testing.T) []event.Event {
	var evs []event.Event
	add := func(epoch uint64, typ event.Type, data any) {
		e := event.MustNew("s_1", typ, data)
		e.Seq, e.Epoch = uint64(len(evs)+1), epoch
		evs = append(evs, e)
	}
	add(0, event.SessionCreated, event.SessionCreatedData{})
	add(1, event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1"})
	add(1, event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("hi")})
	add(1, event.AgentFinished, event.AgentFinishedData{Turn: 1, Content: "hello"})
	return evs
}

func TestFoldLogFoldsWhatItsOwnersWrote(t *testing.T) {
	var s State
	if f := FoldLog(&s, ownedLog(t)); f != nil {
		t.Fatal(f)
	}
	if s.Status != StatusCompleted || s.LastOutput != "hello" || s.Fault != nil {
		t.Fatalf("%+v", s)
	}
}

// Each kind of event the owner cannot fold faults the session there, with
// the offending position, and nothing after it is folded.
func TestFoldLogFaults(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func([]event.Event) []event.Event
		seq  uint64
		want error
	}{
		"no epoch after a claim":               {func(evs []event.Event) []event.Event { evs[2].Epoch = 0; return evs }, 3, ErrNotOwner},
		"a stale epoch":                        {func(evs []event.Event) []event.Event { evs[3].Epoch = 7; return evs }, 4, ErrNotOwner},
		"a claim in a record of another epoch": {func(evs []event.Event) []event.Event { evs[1].Epoch = 2; return evs }, 2, ErrNotOwner},
		"an unknown type":                      {func(evs []event.Event) []event.Event { evs[2].Type = "agent.dreamed"; return evs }, 3, event.ErrUnknownType},
		"a malformed payload":                  {func(evs []event.Event) []event.Event { evs[2].Data = []byte("{"); return evs }, 3, event.ErrMalformed},
		"a turn that skips numbers": {func(evs []event.Event) []event.Event {
			gap := event.MustNew("s_1", event.TurnStarted, event.TurnStartedData{Turn: 3, Message: llm.User("again")})
			gap.Seq, gap.Epoch = 5, 1 // by the owner, after turn 1 ended: turn 2 is missing
			return append(evs, gap)
		}, 5, ErrInconsistent},
		"a first turn that is not 1": {func(evs []event.Event) []event.Event {
			d := event.TurnStartedData{Turn: 2, Message: llm.User("hi")}
			evs[2].Data = event.MustNew("s_1", event.TurnStarted, d).Data
			return evs
		}, 3, ErrInconsistent},
		"a contradiction": {func(evs []event.Event) []event.Event {
			again := evs[3] // a second end of the same turn
			again.Seq = 5
			return append(evs, again)
		}, 5, ErrInconsistent},
	} {
		t.Run(name, func(t *testing.T) {
			var s State
			f := FoldLog(&s, tc.edit(ownedLog(t)))
			if f == nil || f.Code != FaultCorruptLog || f.Seq != tc.seq || !errors.Is(f, tc.want) || s.Fault != f {
				t.Fatalf("fault %+v (%v), want %s at %d wrapping %v", f, f, FaultCorruptLog, tc.seq, tc.want)
			}
			if f.Status() != StatusFailed || s.LastSeq >= tc.seq {
				t.Fatalf("status %s, folded up to %d", f.Status(), s.LastSeq)
			}
			if err := ApplyLog(&s, ownedLog(t)[0]); !errors.Is(err, ErrFaulted) {
				t.Fatalf("after the fault: %v", err)
			}
		})
	}
}

// A record of a newer log schema is not corruption: it needs a newer node.
func TestRecordFault(t *testing.T) {
	_, err := event.DecodeRecord([]byte(`{"v":99,"session":"s_1","events":[{"type":"x","data":{}}]}`), 9)
	if f := RecordFault(9, err); f.Code != FaultNeedsNewerNode || f.Status() != StatusNeedsNewerNode || f.Seq != 9 ||
		!errors.Is(f, event.ErrNewerSchema) {
		t.Fatalf("newer: %+v", f)
	}
	_, err = event.DecodeRecord([]byte(`not json`), 4)
	if f := RecordFault(4, err); f.Code != FaultCorruptLog || f.Status() != StatusFailed || !errors.Is(f, event.ErrMalformed) {
		t.Fatalf("malformed: %+v", f)
	}
}
