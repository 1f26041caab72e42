package replay

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// Errors of Run.
var (
	// ErrNoSession: the events hold no session.created.
	ErrNoSession = errors.New("no session in the log")
	// ErrNoTurn: Options.Turn names a turn the session does not have.
	ErrNoTurn = errors.New("no such turn")
	// ErrUnknownStep: Options.FromStep names a step the session does not
	// have.
	ErrUnknownStep = errors.New("unknown step")
	// ErrNotReplayable: the log cannot be replayed: it does not fold (a
	// corrupt log), or an LLM step records neither its request nor what
	// rebuilds it.
	ErrNotReplayable = errors.New("the log cannot be replayed")
	// ErrBadDefinition: the definition is not one a session could run
	// with (a negative budget or maxSteps).
	ErrBadDefinition = errors.New("invalid definition")
)

// Definition is what defines the requests of an agent's LLM steps.
type Definition struct {
	// Config replaces the configuration of every session.created and
	// session.claimed of the log: its SystemPrompt, Model and ContextChars
	// make the requests, its MaxSteps (0: unlimited) ends turns.
	Config event.Config
	// Tools are the tools every step offers, in order.
	Tools []llm.ToolSchema
}

// Options say which of the recorded steps are compared. The zero value
// compares them all.
type Options struct {
	// Turn, when not 0, compares only that turn's steps.
	Turn int
	// FromStep, when set, compares the steps from that one on (any step's
	// id: an LLM step is compared itself, another from the next LLM step).
	FromStep string
}

// Run replays the session whose log is events (from its start, in order)
// under def: see the package doc. The report says whether the compared
// steps are identical, or where the first divergence is. Errors wrap
// ErrNoSession, ErrNoTurn, ErrUnknownStep, ErrNotReplayable or
// ErrBadDefinition.
func Run(events []event.Event, def Definition, opts Options) (Report, error) {
	if c := def.Config; c.MaxSteps < 0 || c.ContextChars < 0 {
		return Report{}, fmt.Errorf("max_steps %d, context_chars %d: neither may be negative: %w", c.MaxSteps, c.ContextChars, ErrBadDefinition)
	}
	r := &replayer{def: def, opts: opts, offered: map[string][]llm.ToolSchema{}, turns: map[int]bool{}}
	r.report.Definition = describe(def)
	for _, e := range events {
		if err := r.event(e); err != nil {
			return r.report, err
		}
		if r.report.Divergence != nil {
			r.report.Session, r.report.Turns = r.rec.ID, len(r.turns)
			return r.report, nil
		}
	}
	return r.finish()
}

// replayer is one Run: the log folded as recorded (rec) and as the
// definition restates it (rep).
type replayer struct {
	def  Definition
	opts Options
	rec  projection.State
	rep  projection.State
	// hasher hashes the replayed requests, step after step, as a session's
	// owner does.
	hasher event.RequestHasher
	// offered are the tool lists of the log's tools.offered, by digest.
	offered map[string][]llm.ToolSchema
	// from is set once the step Options.FromStep is reached.
	from bool
	// boundary is set from a turn's start to its first LLM step's, where
	// the loop decides whether to compact the context first.
	boundary bool
	// turns are the turns compared, sawTurn whether Options.Turn began.
	turns   map[int]bool
	sawTurn bool
	// compared is set once a recorded turn's definition was compared with
	// the replay's (definitionAt).
	compared bool
	report   Report
}

// inScope reports whether the steps of turn are compared.
func (r *replayer) inScope(turn int) bool {
	return (r.opts.Turn == 0 || turn == r.opts.Turn) && (r.opts.FromStep == "" || r.from)
}

// event compares what the loop decides at e, then folds e both ways.
func (r *replayer) event(e event.Event) error {
	if err := r.check(e); err != nil || r.report.Divergence != nil {
		return err
	}
	if err := r.fold(e); err != nil || r.report.Divergence != nil {
		return err
	}
	if r.opts.FromStep != "" && !r.from && r.rec.Step(r.opts.FromStep) != nil {
		r.from = true
	}
	return nil
}

// check is what happens at e before it is folded: e's step is compared
// when it is an LLM step's start, and the loop's decisions at a turn's
// first step boundary and end.
func (r *replayer) check(e event.Event) error {
	if r.boundary && boundaryEvent(e.Type) {
		r.boundary = false
		if err := r.compaction(e); err != nil || r.report.Divergence != nil {
			return err
		}
	}
	switch e.Type {
	case event.ToolsOffered:
		if d, err := event.DecodeAs[event.ToolsOfferedData](e); err == nil {
			r.offered[d.Digest] = d.Tools
		}
	case event.TurnStarted:
		if d, err := event.DecodeAs[event.TurnStartedData](e); err == nil {
			r.sawTurn = r.sawTurn || d.Turn == r.opts.Turn
			if r.inScope(d.Turn) {
				r.turns[d.Turn] = true
				r.definitionAt(d.Turn, d.Definition)
			}
			r.boundary = true
		}
	case event.TurnReopened:
		r.boundary = r.rep.TurnLLMCalls == 0 // the loop starts the turn's first step again
	case event.AgentFinished, event.AgentCancelled:
		r.boundary = false
	case event.AgentFailed:
		r.boundary = false
		if d, err := event.DecodeAs[event.AgentFailedData](e); err == nil && d.Code == event.CodeMaxSteps && r.inScope(r.rep.Turn) {
			r.maxStepsEnd(e)
		}
	case event.LLMStarted:
		d, err := event.DecodeAs[event.LLMStartedData](e)
		if err != nil {
			return fmt.Errorf("event %d %s: %w: %w", e.Seq, e.Type, ErrNotReplayable, err)
		}
		if d.StepID == r.opts.FromStep {
			r.from = true
		}
		if r.inScope(d.Turn) {
			r.turns[d.Turn] = true
			return r.llmStep(e, d)
		}
	}
	return nil
}

// boundaryEvent reports whether an event of type t is the first the loop
// writes of a turn's first step, after its decision to compact or not: the
// compaction's, a steer taken at the boundary, the tools offered, the
// step's start.
func boundaryEvent(t event.Type) bool {
	switch t {
	case event.SummaryAdded, event.ContextCompacted, event.ContextCompactFailed, event.TurnSteered, event.ToolsOffered, event.LLMStarted:
		return true
	}
	return false
}

// llmStep compares LLM step d's recorded request with the replay's.
func (r *replayer) llmStep(e event.Event, d event.LLMStartedData) error {
	rec, err := projection.RebuildStarted(r.rec.Messages, d, r.offered)
	if err != nil {
		return fmt.Errorf("step %s (seq %d): %w: %w", d.StepID, e.Seq, ErrNotReplayable, err)
	}
	next, err := projection.NextRequest(&r.rep, r.def.Tools, &r.hasher)
	if err != nil {
		return fmt.Errorf("step %s (seq %d): the replay's request: %w: %w", d.StepID, e.Seq, ErrNotReplayable, err)
	}
	div := Divergence{Turn: d.Turn, Step: r.rep.TurnLLMCalls + 1, StepID: d.StepID, Seq: e.Seq}
	if max := maxSteps(&r.rep); max > 0 && r.rep.TurnLLMCalls >= max {
		div.Kind = KindMaxSteps
		div.Summary = fmt.Sprintf("the recording asks the model again; today's loop ends turn %d at max_steps %d instead", d.Turn, max)
		div.Diffs = []Diff{{What: "max_steps", Recorded: limit(maxSteps(&r.rec)), Replayed: limit(max)}}
		r.report.Divergence = &div
		return nil
	}
	if rec.SHA256 == next.Ref.RequestSHA256 {
		r.report.Steps++
		return nil
	}
	div.RecordedSHA256, div.ReplayedSHA256 = rec.SHA256, next.Ref.RequestSHA256
	div.Kind, div.Summary = KindRequest, "the request differs"
	if !rec.Verified {
		// The log's request cannot be rebuilt byte for byte by this build:
		// what it prepares of the recorded history differs from what was sent.
		div.Kind = KindRebuild
		div.Summary = "this build does not rebuild the recorded request (its hash is not the one recorded): it prepares the history otherwise than the build that recorded it"
	}
	div.Diffs = diffRequests(rec.Request, next.Request)
	if d.ContextChars != r.rep.Config.ContextChars {
		div.Diffs = append(div.Diffs, Diff{What: "context_chars", Recorded: fmt.Sprint(d.ContextChars), Replayed: fmt.Sprint(r.rep.Config.ContextChars)})
	}
	r.report.Divergence = &div
	return nil
}

// maxSteps is st's maxSteps for its current turn: the turn's own, else
// the configuration's (0: unlimited).
func maxSteps(st *projection.State) int {
	if st.TurnMaxSteps != 0 {
		return st.TurnMaxSteps
	}
	return st.Config.MaxSteps
}

// limit says a maxSteps.
func limit(max int) string {
	if max <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(max)
}

// maxStepsEnd checks a recorded end of a turn at maxSteps (e, before it is
// folded): today's loop ends the turn there too only when its maxSteps is
// reached as well.
func (r *replayer) maxStepsEnd(e event.Event) {
	max := maxSteps(&r.rep)
	if max > 0 && r.rep.TurnLLMCalls >= max {
		return
	}
	r.report.Divergence = &Divergence{Turn: r.rep.Turn, Step: r.rep.TurnLLMCalls + 1, Seq: e.Seq, Kind: KindMaxSteps,
		Summary: fmt.Sprintf("the recording ends turn %d at max_steps after %d LLM steps; today's loop asks the model again", r.rep.Turn, r.rep.TurnLLMCalls),
		Diffs:   []Diff{{What: "max_steps", Recorded: limit(maxSteps(&r.rec)), Replayed: limit(max)}}}
}

// compaction checks the loop's decision to compact the context before a
// turn's first LLM step: e is the first event written after it.
func (r *replayer) compaction(e event.Event) error {
	if !r.inScope(r.rep.Turn) {
		return nil
	}
	plan, due := compactionDue(&r.rep)
	recorded, at, err := autoCompaction(e)
	if err != nil {
		return fmt.Errorf("event %d %s: %w: %w", e.Seq, e.Type, ErrNotReplayable, err)
	}
	budget, chars := r.rep.Config.ContextChars, r.rep.HistoryChars()
	div := &Divergence{Turn: r.rep.Turn, Step: 1, Seq: e.Seq, Kind: KindCompaction}
	switch {
	case due && !recorded:
		div.Summary = fmt.Sprintf("today's loop compacts the context before turn %d's first LLM step (its history of %d characters is over the budget of %d); the recording did not", r.rep.Turn, chars, budget)
		div.Diffs = []Diff{{What: "compaction", Recorded: "none", Replayed: fmt.Sprintf("a summary of %s", plural(plan.Turns, "turn"))}}
	case !due && recorded:
		div.Summary = fmt.Sprintf("the recording compacts the context before turn %d's first LLM step; today's loop does not (a history of %d characters, a budget of %d)", r.rep.Turn, chars, budget)
		what := "a summary"
		if e.Type == event.ContextCompactFailed {
			what = "an attempt that failed"
		}
		div.Diffs = []Diff{{What: "compaction", Recorded: what, Replayed: "none"}}
	case due && at != nil && *at >= 0 && *at+r.shift() != plan.At:
		div.Summary = fmt.Sprintf("the automatic compaction before turn %d's first LLM step puts its summary elsewhere", r.rep.Turn)
		div.Diffs = []Diff{{What: "compaction", Field: "at", Recorded: fmt.Sprint(*at + r.shift()), Replayed: fmt.Sprint(plan.At)}}
	default:
		return nil
	}
	r.report.Divergence = div
	return nil
}

// compactionDue reports whether the loop compacts st's context before the
// current turn's first LLM step (actors/session llmStep, autoCompact), and
// with what plan.
func compactionDue(st *projection.State) (projection.CompactionPlan, bool) {
	budget := st.Config.ContextChars
	if budget <= 0 || st.TurnLLMCalls != 0 || st.TurnCompactTried || st.HistoryChars() <= budget {
		return projection.CompactionPlan{}, false
	}
	msgs, offset, ok := st.CompactionView()
	if !ok {
		return projection.CompactionPlan{}, false
	}
	plan, ok := projection.PlanCompaction(msgs, true)
	plan.At += offset
	return plan, ok
}

// autoCompaction reports whether e records an automatic compaction, and,
// for its summary, where the summary went.
func autoCompaction(e event.Event) (bool, *int, error) {
	switch e.Type {
	case event.SummaryAdded:
		d, err := event.DecodeAs[event.SummaryAddedData](e)
		return d.Auto, &d.At, err
	case event.ContextCompacted:
		d, err := event.DecodeAs[event.ContextCompactedData](e)
		return d.Auto, nil, err
	case event.ContextCompactFailed:
		d, err := event.DecodeAs[event.ContextCompactFailedData](e)
		return d.Auto, nil, err
	}
	return false, nil, nil
}

// shift is how many more messages the replayed history holds than the
// recorded one: they differ only in their leading system prompt (a
// definition without one removes it, one with a prompt adds it), so an
// index past it moves by as many.
func (r *replayer) shift() int { return len(r.rep.Messages) - len(r.rec.Messages) }

// fold folds e as recorded and as the definition restates it. An event the
// recorded fold refuses makes the log unreplayable; one that only the
// replay's refuses is a divergence.
func (r *replayer) fold(e event.Event) error {
	restated, err := r.restate(e)
	if err != nil {
		return err
	}
	if err := projection.ApplyLog(&r.rec, e); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReplayable, err)
	}
	if err := projection.ApplyLog(&r.rep, restated); err != nil {
		r.report.Divergence = &Divergence{Turn: r.rep.Turn, Seq: e.Seq, Kind: KindFold,
			Summary: fmt.Sprintf("the replayed history cannot take the recorded %s: %v", e.Type, err)}
		return nil
	}
	r.report.Events++
	return nil
}

// restate is e as the replay folds it: a session.created or
// session.claimed with the definition's configuration, a summary.added at
// its place in the replayed history. Any other event is e.
func (r *replayer) restate(e event.Event) (event.Event, error) {
	var payload any
	switch e.Type {
	case event.SessionCreated:
		d, err := event.DecodeAs[event.SessionCreatedData](e)
		if err != nil {
			return e, nil // the recorded fold says what is wrong with it
		}
		d.Config = r.def.Config
		payload = d
	case event.SessionClaimed:
		d, err := event.DecodeAs[event.SessionClaimedData](e)
		if err != nil {
			return e, nil
		}
		d.Config = r.def.Config
		payload = d
	case event.SummaryAdded:
		d, err := event.DecodeAs[event.SummaryAddedData](e)
		if err != nil || d.At < 0 || r.shift() == 0 {
			return e, nil
		}
		d.At += r.shift()
		payload = d
	default:
		return e, nil
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return e, fmt.Errorf("event %d %s restated: %w", e.Seq, e.Type, err)
	}
	e.Data = data
	return e, nil
}

// finish is the report of a replay that met no divergence, or why the
// options named what the log does not have.
func (r *replayer) finish() (Report, error) {
	r.report.Session, r.report.Turns = r.rec.ID, len(r.turns)
	switch {
	case r.rec.ID == "":
		return r.report, ErrNoSession
	case r.opts.Turn < 0 || r.opts.Turn > 0 && !r.sawTurn:
		return r.report, fmt.Errorf("session %s has %d turn(s), no turn %d: %w", r.rec.ID, r.rec.Turn, r.opts.Turn, ErrNoTurn)
	case r.opts.FromStep != "" && !r.from:
		return r.report, fmt.Errorf("session %s has no step %s: %w", r.rec.ID, r.opts.FromStep, ErrUnknownStep)
	}
	r.report.Identical = true
	return r.report, nil
}
