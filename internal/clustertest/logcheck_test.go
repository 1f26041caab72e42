package clustertest

import (
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
)

// sessionLog is a session's log read back, split into turns, with what is
// wrong with it.
type sessionLog struct {
	sid      string
	evs      []event.Event
	claims   []claim
	turns    []*turnLog
	problems []string
}

type claim struct {
	seq   uint64
	epoch uint64
	node  string
}

// turnLog is a turn: its turn.started and the events up to the next one.
type turnLog struct {
	turn      int
	inputID   string
	start     event.Event
	events    []event.Event // after turn.started
	terminals []event.Event // agent.finished, agent.failed, agent.cancelled
	// answering: an llm.started after a tool.finished, without its end yet.
	answering bool
	// claims inside the turn: another node (or a restarted one) resumed it.
	claims int
}

func isTerminal(t event.Type) bool {
	return t == event.AgentFinished || t == event.AgentFailed || t == event.AgentCancelled
}

// ended reports whether the turn has its terminal event.
func (tl *turnLog) ended() bool { return len(tl.terminals) > 0 }

// analyze splits evs into turns and checks the invariants that hold for any
// log, crash or not:
//
//   - claims have growing epochs, and every event after a claim carries the
//     claim's epoch (an older owner never writes after it was fenced);
//   - turns are numbered 1, 2, 3... and each turn but the last has exactly one
//     terminal event, the last at most one, and nothing of the turn follows it;
//   - a tool call has at most one tool.finished, and never starts again after
//     it; an LLM step has at most one end (llm.completed or llm.failed);
//   - in a turn that ended, every tool call that started has its result.
func analyze(sid string, evs []event.Event) *sessionLog {
	l := &sessionLog{sid: sid, evs: evs}
	bad := func(e event.Event, format string, args ...any) {
		l.problems = append(l.problems, fmt.Sprintf("%s seq %d %s (epoch %d): %s", sid, e.Seq, e.Type, e.Epoch, fmt.Sprintf(format, args...)))
	}
	var epoch uint64
	toolDone := map[string]uint64{} // call id -> seq of its tool.finished
	stepEnds := map[string]int{}
	stepStarted := map[string]bool{}
	var cur *turnLog
	sawToolResult := false // in the current turn
	openLLM := map[string]bool{}
	for _, e := range evs {
		switch e.Type {
		case event.SessionClaimed:
			d, err := event.DecodeAs[event.SessionClaimedData](e)
			if err != nil {
				bad(e, "%v", err)
				continue
			}
			if d.Epoch <= epoch {
				bad(e, "claims epoch %d after epoch %d", d.Epoch, epoch)
			}
			if e.Epoch != d.Epoch {
				bad(e, "envelope epoch %d, payload epoch %d", e.Epoch, d.Epoch)
			}
			epoch = d.Epoch
			l.claims = append(l.claims, claim{seq: e.Seq, epoch: d.Epoch, node: d.Node})
			if cur != nil && !cur.ended() {
				cur.claims++
			}
			continue
		case event.SessionCreated, event.SessionForked:
			if len(l.claims) > 0 {
				bad(e, "after a claim")
			}
			continue
		}
		if len(l.claims) == 0 {
			bad(e, "written before any session.claimed")
		} else if e.Epoch != epoch {
			bad(e, "written with epoch %d after the claim of epoch %d (by %s): a fenced owner wrote", e.Epoch, epoch, l.claims[len(l.claims)-1].node)
		}
		if e.Type == event.TurnStarted {
			d, err := event.DecodeAs[event.TurnStartedData](e)
			if err != nil {
				bad(e, "%v", err)
				continue
			}
			if cur != nil && !cur.ended() {
				bad(e, "turn %d starts while turn %d (input %s) has not ended", d.Turn, cur.turn, cur.inputID)
			}
			if want := len(l.turns) + 1; d.Turn != want {
				bad(e, "turn %d, want %d", d.Turn, want)
			}
			cur = &turnLog{turn: d.Turn, inputID: d.InputID, start: e}
			l.turns = append(l.turns, cur)
			sawToolResult = false
			openLLM = map[string]bool{}
			continue
		}
		if cur == nil {
			switch e.Type {
			case event.CheckpointCreated, event.ContextCompacted, event.ContextCompactFailed, event.SummaryAdded:
			default:
				bad(e, "before any turn")
			}
			continue
		}
		if cur.ended() {
			switch e.Type {
			case event.CheckpointCreated, event.ContextCompacted, event.ContextCompactFailed, event.SummaryAdded, event.ArtifactCreated:
			default:
				bad(e, "in turn %d (input %s) after its %s at seq %d", cur.turn, cur.inputID, cur.terminals[0].Type, cur.terminals[0].Seq)
			}
			if isTerminal(e.Type) {
				cur.terminals = append(cur.terminals, e)
			}
			continue
		}
		cur.events = append(cur.events, e)
		switch e.Type {
		case event.LLMStarted:
			d, err := event.DecodeAs[event.LLMStartedData](e)
			if err != nil {
				bad(e, "%v", err)
				continue
			}
			stepStarted[d.StepID] = true
			openLLM[d.StepID] = sawToolResult
		case event.LLMCompleted, event.LLMFailed:
			var step string
			if e.Type == event.LLMCompleted {
				d, err := event.DecodeAs[event.LLMCompletedData](e)
				if err != nil {
					bad(e, "%v", err)
					continue
				}
				step = d.StepID
			} else {
				d, err := event.DecodeAs[event.LLMFailedData](e)
				if err != nil {
					bad(e, "%v", err)
					continue
				}
				step = d.StepID
			}
			if !stepStarted[step] {
				bad(e, "step %s never started", step)
			}
			if stepEnds[step]++; stepEnds[step] > 1 {
				bad(e, "step %s ends a second time", step)
			}
			delete(openLLM, step)
		case event.ToolStarted:
			d, err := event.DecodeAs[event.ToolStartedData](e)
			if err != nil {
				bad(e, "%v", err)
				continue
			}
			if at, ok := toolDone[d.Call.ID]; ok {
				bad(e, "tool call %s (%s) starts again after its tool.finished at seq %d", d.Call.ID, d.Call.Name, at)
			}
		case event.ToolFinished:
			d, err := event.DecodeAs[event.ToolFinishedData](e)
			if err != nil {
				bad(e, "%v", err)
				continue
			}
			if at, ok := toolDone[d.CallID]; ok {
				bad(e, "tool call %s (%s) finished a second time (first at seq %d)", d.CallID, d.Name, at)
				continue
			}
			toolDone[d.CallID] = e.Seq
			sawToolResult = true
		}
		if isTerminal(e.Type) {
			cur.terminals = append(cur.terminals, e)
			for _, te := range cur.events {
				if te.Type != event.ToolStarted {
					continue
				}
				d, _ := event.DecodeAs[event.ToolStartedData](te)
				if _, ok := toolDone[d.Call.ID]; !ok {
					bad(e, "turn %d ended while tool call %s (%s, started at seq %d) has no result", cur.turn, d.Call.ID, d.Call.Name, te.Seq)
				}
			}
		}
	}
	if cur != nil && !cur.ended() {
		for _, afterTool := range openLLM {
			if afterTool {
				cur.answering = true
			}
		}
	}
	return l
}

// owner is the node of the last claim.
func (l *sessionLog) owner() string {
	if len(l.claims) == 0 {
		return ""
	}
	return l.claims[len(l.claims)-1].node
}

// turnsOf returns the turns that input id started.
func (l *sessionLog) turnsOf(id string) []*turnLog {
	var out []*turnLog
	for _, tl := range l.turns {
		if tl.inputID == id {
			out = append(out, tl)
		}
	}
	return out
}

// inputEnded reports whether input id's turn has ended.
func (l *sessionLog) inputEnded(id string) bool {
	ts := l.turnsOf(id)
	return len(ts) > 0 && ts[len(ts)-1].ended()
}

// running is the turn that has not ended, or nil.
func (l *sessionLog) running() *turnLog {
	if n := len(l.turns); n > 0 && !l.turns[n-1].ended() {
		return l.turns[n-1]
	}
	return nil
}

// checkInputs adds to l.problems what is wrong with the turns of inputs, the
// ids sent to the session, in order: each started exactly one turn, which
// finished (agent.finished) exactly once; no other input started a turn.
func (l *sessionLog) checkInputs(inputs []string) []string {
	probs := append([]string(nil), l.problems...)
	sent := map[string]bool{}
	for _, id := range inputs {
		sent[id] = true
		ts := l.turnsOf(id)
		switch {
		case len(ts) == 0:
			probs = append(probs, fmt.Sprintf("%s: input %s started no turn (lost)", l.sid, id))
			continue
		case len(ts) > 1:
			var seqs []string
			for _, tl := range ts {
				seqs = append(seqs, fmt.Sprintf("turn %d at seq %d", tl.turn, tl.start.Seq))
			}
			probs = append(probs, fmt.Sprintf("%s: input %s started %d turns: %s", l.sid, id, len(ts), strings.Join(seqs, ", ")))
		}
		for _, tl := range ts {
			switch {
			case len(tl.terminals) == 0:
				probs = append(probs, fmt.Sprintf("%s: turn %d (input %s) has not ended", l.sid, tl.turn, id))
			case len(tl.terminals) > 1:
				probs = append(probs, fmt.Sprintf("%s: turn %d (input %s) ended %d times", l.sid, tl.turn, id, len(tl.terminals)))
			}
			for _, te := range tl.terminals {
				if te.Type != event.AgentFinished {
					probs = append(probs, fmt.Sprintf("%s: turn %d (input %s) ended with %s at seq %d: %s", l.sid, tl.turn, id, te.Type, te.Seq, te.Data))
				}
			}
		}
	}
	for _, tl := range l.turns {
		if !sent[tl.inputID] {
			probs = append(probs, fmt.Sprintf("%s: turn %d at seq %d was started by input %q, which was not sent", l.sid, tl.turn, tl.start.Seq, tl.inputID))
		}
	}
	return probs
}

// resumed counts the turns that a claim interrupted: resumed by a new owner.
func (l *sessionLog) resumed() int {
	n := 0
	for _, tl := range l.turns {
		if tl.claims > 0 {
			n++
		}
	}
	return n
}

// dump is the log, one line per event, for failure messages.
func (l *sessionLog) dump() string {
	var b strings.Builder
	for _, e := range l.evs {
		data := string(e.Data)
		if len(data) > 160 {
			data = data[:160] + "..."
		}
		fmt.Fprintf(&b, "  %5d e%d %-22s %s\n", e.Seq, e.Epoch, e.Type, data)
	}
	return b.String()
}
