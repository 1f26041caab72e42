package projection

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// soundWriter writes, from fuzz input, a log as owners that crash and resume
// write it: claims at any point, turns of LLM and tool steps, steps left open
// by a claim, cancels that leave calls without a result and the repair of the
// next turn.
type soundWriter struct {
	b       *logBuilder
	r       *byteReader
	epoch   uint64
	turn    int
	running bool
	pending []llm.ToolCall // calls of the turn without a result
	started map[string]bool
	calls   int
}

func (w *soundWriter) claim() {
	w.epoch++
	w.b.claim(w.epoch, fmt.Sprintf("n%d", w.r.next()%3))
}

func (w *soundWriter) startTurn() {
	for _, c := range w.pending { // the repair of BeginTurn
		w.b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: NotExecutedOutput, IsError: true, Code: event.CodeNotExecuted})
	}
	w.pending, w.started = nil, map[string]bool{}
	w.turn++
	w.running = true
	w.b.input(w.turn, fmt.Sprintf("in_%d", w.turn))
}

func (w *soundWriter) llmStep() {
	switch w.r.next() % 3 {
	case 0: // left open: a claim or another attempt follows
		w.b.add(event.LLMStarted, event.LLMStartedData{StepID: w.b.nextStep(), Turn: w.turn})
	case 1:
		w.b.llm("text")
	default:
		var cs []llm.ToolCall
		for range 1 + w.r.next()%3 {
			w.calls++
			cs = append(cs, call(fmt.Sprintf("c%d", w.calls), "t", `{}`))
		}
		w.b.llm("", cs...)
		w.pending = append(w.pending, cs...)
	}
}

// toolStep runs the first pending call, or only starts it (its owner dies).
func (w *soundWriter) toolStep() {
	c := w.pending[0]
	id := w.b.nextStep()
	w.b.add(event.ToolStarted, event.ToolStartedData{StepID: id, Call: c})
	w.started[c.ID] = true
	if w.r.next()%4 != 0 {
		w.b.add(event.ToolFinished, event.ToolFinishedData{StepID: id, CallID: c.ID, Name: c.Name, Output: "out"})
		w.pending = w.pending[1:]
	}
}

func (w *soundWriter) endTurn() {
	if w.r.next()%3 == 0 {
		w.b.add(event.AgentCancelled, event.AgentCancelledData{Turn: w.turn})
	} else {
		for len(w.pending) > 0 {
			c := w.pending[0]
			w.b.tool(c, "out")
			w.pending = w.pending[1:]
		}
		w.b.finish(w.turn, "done")
	}
	w.running = false
}

func writeSound(t *testing.T, data []byte) []event.Event {
	w := &soundWriter{b: newLog(t, "s_fuzz", event.Config{}), r: &byteReader{b: data}, started: map[string]bool{}}
	w.claim()
	for w.r.more() && len(w.b.events) < 400 {
		switch op := w.r.next() % 6; {
		case op == 0:
			w.claim()
		case op == 1 && !w.running:
			w.startTurn()
		case op == 2 && w.running:
			w.llmStep()
		case op == 3 && w.running && len(w.pending) > 0:
			w.toolStep()
		case op == 4 && w.running:
			w.endTurn()
		case op == 5:
			w.b.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp", UpToSeq: w.b.seq})
		}
	}
	return withEpochs(w.b.events)
}

// FuzzAuditSound: a log written as sound owners write it has no problems, and
// every turn.started is a turn.
func FuzzAuditSound(f *testing.F) {
	f.Add([]byte{1, 2, 2, 3, 3, 1, 4, 1})
	f.Add([]byte{1, 1, 2, 2, 0, 3, 0, 0, 4, 0, 1, 1, 2, 1, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := writeSound(t, data)
		r := Audit(evs)
		if len(r.Problems) > 0 {
			t.Fatalf("problems in a sound log:\n%s\n%s", r.Problems, r.Dump())
		}
		starts := 0
		for _, e := range evs {
			if e.Type == event.TurnStarted {
				starts++
			}
		}
		if starts != len(r.Turns) {
			t.Fatalf("%d turn.started, %d turns", starts, len(r.Turns))
		}
	})
}

// FuzzAudit: any sequence of events, payloads and epochs, however wrong, gives
// a report without a panic, and every problem names its session.
func FuzzAudit(f *testing.F) {
	f.Add([]byte{0, 2, 3, 4, 6, 10, 11, 19, 3, 200})
	f.Add([]byte{2, 1, 3, 0, 10, 1, 10, 1, 11, 1, 11, 1})
	types := append(event.Types(), "agent.dreamed")
	payloads := []string{``, `{}`, `null`, `[]`, `{"epoch":1,"node":"n"}`, `{"epoch":0}`, `{"turn":1,"message":{"role":"user","content":"x"}}`,
		`{"turn":2,"message":{"role":"user"},"input_id":"in_1"}`, `{"step_id":"st1"}`, `{"step_id":"st1","call":{"id":"c1","name":"t"}}`,
		`{"call_id":"c1","code":"not_executed"}`, `{"call_id":"c1"}`, `{"turn":"one"}`, `{"step_id":""}`}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		var evs []event.Event
		for r.more() && len(evs) < 300 {
			evs = append(evs, event.Event{Seq: uint64(r.next()), Session: "s_any", Type: types[r.next()%len(types)],
				Epoch: uint64(r.next() % 4), Data: json.RawMessage(payloads[r.next()%len(payloads)])})
		}
		rep := Audit(evs)
		for _, p := range rep.Problems {
			if p.Session != "s_any" || p.What == "" {
				t.Fatalf("problem without its session or text: %+v", p)
			}
		}
		_ = rep.CheckInputs("in_1")
		_ = rep.Dump()
		_ = rep.Resumed()
		_, _ = rep.Running()
	})
}
