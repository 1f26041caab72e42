package client

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/wire"
)

// numbered numbers events from seq on.
func numbered(seq uint64, evs ...event.Event) []event.Event {
	for i := range evs {
		evs[i].Seq = seq + uint64(i)
	}
	return evs
}

func delta(step, text string, epoch string) *nats.Msg {
	m := nats.NewMsg(wire.DeltaSubject("s"))
	m.Header.Set(wire.HeaderEpoch, epoch)
	m.Data, _ = json.Marshal(wire.Delta{StepID: step, Delta: llm.Delta{Text: text}})
	return m
}

// feed gives st the events and returns the types of those it took as its own
// and the text of the deltas it released.
func feed(st *turnState, evs []event.Event) (string, string) {
	var ours []string
	var released strings.Builder
	for _, ev := range evs {
		mine, ds := st.event(ev)
		if mine {
			ours = append(ours, string(ev.Type))
		}
		for _, d := range ds {
			released.WriteString(d.Text)
		}
	}
	return strings.Join(ours, " "), released.String()
}

func TestRunTakesOnlyItsOwnTurn(t *testing.T) {
	st := newTurnState(asked{sid: "s", inputID: "in_mine", command: wire.CommandRun}, 9)
	// Deltas of the other turn's step and of ours come before their llm.started.
	for _, m := range []*nats.Msg{delta("st_old", "old ", "2"), delta("st_new", "new ", "2"), delta("st_new", "stale", "1")} {
		if _, ours := st.delta(m); ours {
			t.Fatal("a delta of an unknown step was taken")
		}
	}
	evs := numbered(10,
		event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_old"}), // the tail of a turn a dead node left open
		event.MustNew("s", event.AgentFinished, event.AgentFinishedData{Turn: 1}),
		event.MustNew("s", event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 2}),
		event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 2, InputID: "in_mine", Message: llm.User("hi")}),
		event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_new"}),
		event.MustNew("s", event.LLMCompleted, event.LLMCompletedData{StepID: "st_new", Response: llm.Response{Content: "new answer", Usage: llm.Usage{OutputTokens: 3}},
			Cost: &pricing.Cost{USD: 0.25}}),
		event.MustNew("s", event.AgentFinished, event.AgentFinishedData{Turn: 2, Content: "new answer", Steps: 1, Usage: llm.Usage{OutputTokens: 3}}),
		event.MustNew("s", event.CheckpointCreated, event.CheckpointCreatedData{UpToSeq: 16}),
		event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 3, InputID: "in_next", Message: llm.User("next")}),
	)
	ours, released := feed(st, evs)
	if ours != "turn.started llm.started llm.completed agent.finished" || released != "new " {
		t.Fatalf("took %q and released %q", ours, released)
	}
	if d, ours := st.delta(delta("st_new", "late", "2")); !ours || d.Text != "late" {
		t.Errorf("a delta of its own step: %v", ours)
	}
	if _, ours := st.delta(delta("st_old", "late", "2")); ours {
		t.Error("a delta of the other turn's step was taken")
	}
	if st.end == nil || st.end.Seq != 16 || !st.eventsOver(nil, false) {
		t.Fatalf("end %+v", st.end)
	}
	o := st.outcomeOfEnd()
	// An agent.finished of before session_usage and costs: the turn's from
	// its steps' events.
	if o.Status != "completed" || o.Turn != 2 || o.Content != "new answer" || o.LastSeq != 16 || o.InputID != "in_mine" || o.Usage.OutputTokens != 3 ||
		o.Cost != (pricing.Cost{USD: 0.25}) {
		t.Fatalf("outcome of the end: %+v", o)
	}
}

func TestResumeTakesTheOpenTurn(t *testing.T) {
	st := newTurnState(asked{sid: "s", inputID: "in_resume", command: wire.CommandResume}, 20)
	evs := numbered(21,
		event.MustNew("s", event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 3}),
		event.MustNew("s", event.LLMFailed, event.LLMFailedData{StepID: "st_1", Code: event.CodeInterrupted, Error: "interrupted"}),
		event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_2"}),
		event.MustNew("s", event.AgentFailed, event.AgentFailedData{Turn: 4, Error: "boom", Code: event.CodeProvider, Steps: 2}),
		event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 5, InputID: "in_other", Message: llm.User("x")}),
	)
	if ours, _ := feed(st, evs); ours != "llm.failed llm.started agent.failed" {
		t.Fatalf("took %q", ours)
	}
	if o := st.outcomeOfEnd(); o.Status != "failed" || o.Error != "boom" || o.Code != event.CodeProvider || o.Turn != 4 || o.Steps != 2 {
		t.Fatalf("outcome of the end: %+v", o)
	}

	// A resume whose turn had ended: the next turn, begun after the node
	// answered (its outcome names turn 4), is another's.
	st = newTurnState(asked{sid: "s", inputID: "in_resume", command: wire.CommandResume}, 20)
	if ours, _ := feed(st, numbered(21, event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 5, InputID: "in_other", Message: llm.User("x")}),
		event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_3"}))); ours != "" || st.over {
		t.Fatalf("took %q before the answer (over %v)", ours, st.over)
	}
	st.answer(wire.Outcome{Turn: 4, FailureCode: wire.FailureNothingToResume})
	if evs, _ := st.decide(); len(evs) != 0 || !st.over {
		t.Fatalf("took %d events of another's turn (over %v)", len(evs), st.over)
	}
	// Its outcome's last sequence is behind the log read: nothing more to wait for.
	st = newTurnState(asked{sid: "s", inputID: "in_resume", command: wire.CommandResume}, 20)
	if st.eventsOver(&wire.Outcome{LastSeq: 21}, false) || !st.eventsOver(&wire.Outcome{LastSeq: 20}, false) || !st.eventsOver(nil, true) {
		t.Fatal("events over")
	}
}

// A resume published as a turn began, before the turn's first record was in
// the log: the node answers it once that turn is over ("nothing to resume",
// naming that turn), and the turn is the resume's, its held deltas too.
func TestResumeTakesTheTurnThatBeganAsItWasPublished(t *testing.T) {
	turn := func() []event.Event {
		return numbered(21,
			event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 5, InputID: "in_run", Message: llm.User("x")}),
			event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_1"}),
			event.MustNew("s", event.LLMCompleted, event.LLMCompletedData{StepID: "st_1", Response: llm.Response{Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}}}),
			event.MustNew("s", event.AgentFinished, event.AgentFinishedData{Turn: 5, Content: "done", Steps: 1}),
			event.MustNew("s", event.TurnStarted, event.TurnStartedData{Turn: 6, InputID: "in_next", Message: llm.User("y")}),
			event.MustNew("s", event.LLMStarted, event.LLMStartedData{StepID: "st_2"}),
		)
	}
	types := func(evs []event.Event) string {
		var ts []string
		for _, ev := range evs {
			ts = append(ts, string(ev.Type))
		}
		return strings.Join(ts, " ")
	}

	// The answer after the log: the candidate waits for it.
	st := newTurnState(asked{sid: "s", inputID: "in_resume", command: wire.CommandResume}, 20)
	if _, ok := st.delta(delta("st_1", "he", "1")); ok {
		t.Fatal("a delta of a step not seen yet was taken")
	}
	if ours, released := feed(st, turn()); ours != "" || released != "" || st.over || st.end != nil {
		t.Fatalf("took %q (deltas %q) before the answer", ours, released)
	}
	st.answer(wire.Outcome{Turn: 5, LastSeq: 24, FailureCode: wire.FailureNothingToResume})
	evs, ds := st.decide()
	if got := types(evs); got != "turn.started llm.started llm.completed agent.finished" {
		t.Fatalf("took %q", got)
	}
	if len(ds) != 1 || ds[0].Text != "he" {
		t.Fatalf("released deltas %+v", ds)
	}
	if !st.over || st.end == nil || st.end.Seq != 24 {
		t.Fatalf("the turn's end: over %v, end %+v", st.over, st.end)
	}
	if o := st.outcomeOfEnd(); o.Status != "completed" || o.Content != "done" || o.Turn != 5 || o.Usage.OutputTokens != 2 {
		t.Fatalf("outcome of the end: %+v", o)
	}
	if evs, _ := st.decide(); evs != nil {
		t.Fatal("decided twice")
	}

	// The answer first: the candidate is decided as soon as it is read.
	st = newTurnState(asked{sid: "s", inputID: "in_resume", command: wire.CommandResume}, 20)
	st.answer(wire.Outcome{Turn: 5, LastSeq: 24, FailureCode: wire.FailureNothingToResume})
	if ours, _ := feed(st, turn()[:1]); ours != "" {
		t.Fatalf("took %q before deciding", ours)
	}
	if evs, _ := st.decide(); types(evs) != "turn.started" {
		t.Fatalf("took %q", types(evs))
	}
	if ours, _ := feed(st, turn()[1:]); ours != "llm.started llm.completed agent.finished" || !st.over {
		t.Fatalf("then took %q", ours)
	}

	// An approve never takes a turn that began after it.
	st = newTurnState(asked{sid: "s", inputID: "in_ok", command: wire.CommandApprove}, 20)
	if ours, _ := feed(st, turn()); ours != "" || !st.over {
		t.Fatalf("an approve took %q", ours)
	}
}

func TestReplies(t *testing.T) {
	a := asked{sid: "s", inputID: "in_1", command: wire.CommandRun}
	msg := func(v any, inputHeader string) *nats.Msg {
		m := nats.NewMsg("_INBOX.x")
		m.Data, _ = json.Marshal(v)
		if inputHeader != "" {
			m.Header.Set(wire.HeaderInputID, inputHeader)
		}
		return m
	}
	o, final, err := a.reply(msg(wire.Outcome{Session: "s", InputID: "in_1", Status: "completed", Content: "hi"}, ""))
	if !final || err != nil || o.Content != "hi" {
		t.Errorf("an outcome: %+v %v %v", o, final, err)
	}
	if _, final, _ := a.reply(msg(wire.Outcome{InputID: "in_2", Status: "completed"}, "")); final {
		t.Error("another input's outcome was taken")
	}
	if _, final, _ := a.reply(msg(wire.Outcome{InputID: "in_1", Failure: "stopping", FailureCode: wire.FailureStopped}, "")); final {
		t.Error("a handover was taken as final")
	}
	o, final, err = a.reply(msg(wire.Outcome{InputID: "in_1", Status: "idle", Failure: "no", FailureCode: wire.FailureBusy}, ""))
	if !final || !errors.Is(err, ErrBusy) || o.FailureCode != wire.FailureBusy {
		t.Errorf("a failure: %+v %v", o, err)
	}
	o, final, err = a.reply(msg(wire.Refusal("s", "", wire.CodeMalformedInput, "bad"), "in_1"))
	var ce *CommandError
	if !final || !errors.Is(err, ErrMalformedInput) || !errors.As(err, &ce) || ce.Outcome.InputID != "in_1" || o.Status != wire.StatusRefused {
		t.Errorf("a refusal on the reply subject: %+v %v", o, err)
	}
	if _, mine, _ := a.refused(msg(wire.Refusal("s", "in_9", wire.CodeRejected, "x"), "")); mine {
		t.Error("another input's refusal was taken")
	}
	if _, mine, _ := a.refused(msg(wire.Outcome{Session: "s", Status: "completed"}, "")); mine {
		t.Error("an outcome without an input id was taken on the error subject")
	}
	if o, mine, err := a.refused(msg(wire.Refusal("s", "in_1", wire.CodeRejected, "x"), "")); !mine || !errors.Is(err, ErrRejected) || o.FailureCode != wire.CodeRejected {
		t.Errorf("rejected: %v", err)
	}
	if _, final, _ := a.reply(&nats.Msg{Data: []byte("not json")}); final {
		t.Error("garbage was taken")
	}
}

// TestEndOutcome: the end of a turn tells its outcome, with its recorded
// usage and cost; an agent.finished written before session_usage existed
// has the session's usage only, one written before costs were, no cost.
func TestEndOutcome(t *testing.T) {
	turn, total := llm.Usage{InputTokens: 3}, llm.Usage{InputTokens: 10}
	cost, totalCost := pricing.Cost{USD: 0.5}, pricing.Cost{USD: 1.5, Unpriced: 1}
	ev := event.MustNew("s", event.AgentFinished, event.AgentFinishedData{Turn: 2, Content: "hi", Steps: 1, Usage: turn, SessionUsage: &total,
		Cost: &cost, SessionCost: &totalCost})
	ev.Seq = 9
	if o := EndOutcome(ev); o.Status != "completed" || o.Turn != 2 || o.Content != "hi" || o.Usage != turn || o.SessionUsage != total || o.LastSeq != 9 ||
		o.Cost != cost || o.SessionCost != totalCost {
		t.Errorf("agent.finished: %+v", o)
	}
	old := event.MustNew("s", event.AgentFinished, event.AgentFinishedData{Turn: 2, Content: "hi", Steps: 1, Usage: total})
	if o := EndOutcome(old); o.Usage != (llm.Usage{}) || o.SessionUsage != total || !o.Cost.IsZero() || !o.SessionCost.IsZero() {
		t.Errorf("an older agent.finished: %+v", o)
	}
	cancelled := event.MustNew("s", event.AgentCancelled, event.AgentCancelledData{Turn: 3, Reason: "enough"})
	if o := EndOutcome(cancelled); o.Status != "cancelled" || o.Error != "enough" || o.Code != event.CodeCancelled || o.Turn != 3 {
		t.Errorf("agent.cancelled: %+v", o)
	}
}
