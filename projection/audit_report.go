package projection

import (
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
)

// Owner is the node of the last claim; empty before the first.
func (r Report) Owner() string {
	if len(r.Claims) == 0 {
		return ""
	}
	return r.Claims[len(r.Claims)-1].Node
}

// ClaimAt returns the claim in force when e was written: the last one
// before it in the log. ok is false for an event before every claim.
func (r Report) ClaimAt(e event.Event) (c Claim, ok bool) {
	for _, cm := range r.Claims {
		if !(event.Event{Seq: cm.Seq, Index: cm.Index}).Before(e) {
			break
		}
		c, ok = cm, true
	}
	return c, ok
}

// TurnsOf returns the turns input id started: one in a sound log that has it.
func (r Report) TurnsOf(id string) []TurnLog {
	var out []TurnLog
	for _, t := range r.Turns {
		if t.InputID == id {
			out = append(out, t)
		}
	}
	return out
}

// InputEnded reports whether the last turn input id started has ended.
func (r Report) InputEnded(id string) bool {
	ts := r.TurnsOf(id)
	return len(ts) > 0 && ts[len(ts)-1].Ended()
}

// Running returns the turn that has not ended; ok is false when none runs.
func (r Report) Running() (t TurnLog, ok bool) {
	if n := len(r.Turns); n > 0 && !r.Turns[n-1].Ended() {
		return r.Turns[n-1], true
	}
	return TurnLog{}, false
}

// Resumed counts the turns a claim interrupted: resumed by a new owner.
func (r Report) Resumed() int {
	n := 0
	for _, t := range r.Turns {
		if t.Claims > 0 {
			n++
		}
	}
	return n
}

// CheckInputs returns r.Problems and what is wrong with the turns of inputs,
// the ids of the run inputs sent to the session: each started exactly one
// turn, which ended exactly once, with agent.finished; no other input started
// a turn. An empty result is a log where every input was run once and
// nothing else ran.
func (r Report) CheckInputs(inputs ...string) Problems {
	probs := append(Problems(nil), r.Problems...)
	bad := func(format string, args ...any) {
		probs = append(probs, Problem{Session: r.Session, What: fmt.Sprintf(format, args...)})
	}
	sent := map[string]bool{}
	for _, id := range inputs {
		sent[id] = true
		ts := r.TurnsOf(id)
		switch {
		case len(ts) == 0:
			bad("input %s started no turn (lost)", id)
		case len(ts) > 1:
			var at []string
			for _, t := range ts {
				at = append(at, fmt.Sprintf("turn %d at seq %d", t.Turn, t.Start.Seq))
			}
			bad("input %s started %d turns: %s", id, len(ts), strings.Join(at, ", "))
		}
		for _, t := range ts {
			switch {
			case len(t.Ends) == 0:
				bad("turn %d (input %s) has not ended", t.Turn, id)
			case len(t.Ends) > 1:
				bad("turn %d (input %s) ended %d times", t.Turn, id, len(t.Ends))
			}
			for _, e := range t.Ends {
				if e.Type != event.AgentFinished {
					bad("turn %d (input %s) ended with %s at seq %d: %s", t.Turn, id, e.Type, e.Seq, e.Data)
				}
			}
		}
	}
	for _, t := range r.Turns {
		if !sent[t.InputID] && t.Start.Type != event.TurnForked {
			bad("turn %d at seq %d was started by input %q, which was not sent", t.Turn, t.Start.Seq, t.InputID)
		}
	}
	return probs
}

// dumpData is how much of an event's payload Dump shows.
const dumpData = 160

// Dump is the log, one line an event (sequence and index, epoch, type, the
// start of its payload), for failure messages.
func (r Report) Dump() string {
	var b strings.Builder
	for _, e := range r.Events {
		data := string(e.Data)
		if len(data) > dumpData {
			data = data[:dumpData] + "..."
		}
		fmt.Fprintf(&b, "  %7s e%d %-22s %s\n", position(e.Seq, e.Index), e.Epoch, e.Type, data)
	}
	return b.String()
}
