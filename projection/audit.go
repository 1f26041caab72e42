package projection

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/event"
)

// Report is what Audit found in a session's log: its claims, its turns, and
// every way the log breaks the invariants that hold for any log, crash,
// failover or not.
type Report struct {
	// Session is the session of the first event.
	Session string
	// Events is the log audited, as given.
	Events []event.Event
	// Claims are the session.claimed events, in order.
	Claims []Claim
	// Turns are the turns, in order: Turns[i].Turn is i+1 in a sound log.
	Turns []TurnLog
	// Problems are the broken invariants, in the order found; none in a sound
	// log.
	Problems Problems
}

// Claim is a session.claimed: a node took the session over at Seq (the
// claim's record) and Index (its place in the record).
type Claim struct {
	Seq   uint64
	Index int
	Epoch uint64
	Node  string
}

// TurnLog is one turn: its turn.started and the events that belong to it.
type TurnLog struct {
	// Turn is the number turn.started gives it; InputID the input that
	// started it.
	Turn    int
	InputID string
	// Start is its turn.started (a fork's open turn: its turn.forked).
	Start event.Event
	// Events are the turn's events after Start, up to and including its
	// first end.
	Events []event.Event
	// Ends are its agent.finished, agent.failed and agent.cancelled: one in a
	// turn that ended, none in a turn that runs; more is a problem.
	Ends []event.Event
	// Reopened are its turn.reopened events: each follows an agent.failed
	// of code budget_exceeded, which is then no longer its end but one of
	// Events, and the turn runs on.
	Reopened []event.Event
	// Steers are the input ids of its turn.steered events, in order: the
	// messages that joined it while it ran.
	Steers []string
	// Claims counts the claims while it ran: owners that resumed it.
	Claims int
	// Answering is set on a turn that runs with an LLM step open after a tool
	// result: the model is writing its answer.
	Answering bool
}

// Ended reports whether the turn has its end.
func (t TurnLog) Ended() bool { return len(t.Ends) > 0 }

// Problem is one broken invariant, at an event of the log (Seq, Index, Type
// and Epoch are zero for a problem of the log as a whole, such as an input
// that started no turn).
type Problem struct {
	Session string
	Seq     uint64
	Index   int
	Type    event.Type
	Epoch   uint64
	// What says what is wrong.
	What string
}

// String is the problem on one line: "s_1 seq 12 tool.started (epoch 2): ...",
// with the event's index in its record after the sequence when it is not the
// first ("seq 12.1").
func (p Problem) String() string {
	if p.Seq == 0 {
		return p.Session + ": " + p.What
	}
	return fmt.Sprintf("%s seq %s %s (epoch %d): %s", p.Session, position(p.Seq, p.Index), p.Type, p.Epoch, p.What)
}

// position writes an event's place in the log: its record's sequence, and
// its index in the record when it is not the first.
func position(seq uint64, index int) string {
	if index == 0 {
		return strconv.FormatUint(seq, 10)
	}
	return fmt.Sprintf("%d.%d", seq, index)
}

// Problems are a list of problems; String prints one a line.
type Problems []Problem

func (ps Problems) String() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Audit splits a session's log (in stream order) into its claims and turns
// and checks the invariants of every log:
//
//   - claims' epochs grow, and a claim's envelope carries its epoch; every
//     event after a claim carries the claim's epoch (an older owner never
//     writes after it was fenced), and nothing but session.created and
//     session.forked (a fork's turn.forked and session.edited) comes before
//     the first claim;
//   - turns are numbered 1, 2, 3... (a fork's on from the turns it copied,
//     as Apply numbers them); a turn starts only after the previous one
//     ended, ends at most once, and nothing of it follows its end (between
//     turns come only checkpoints, compactions, artifacts and the "not
//     executed" results of calls a cancel left open, and budget.set); a
//     turn that failed at its budget may be reopened (turn.reopened) and
//     run on;
//   - an LLM step ends (llm.completed, llm.failed) at most once, and only after
//     its llm.started, which names only tools a tools.offered before it
//     recorded;
//   - a tool call finishes at most once, and never starts again after its
//     result;
//   - a turn that finished or failed has a result for every call that started
//     (a cancelled turn's calls get theirs before the next turn).
//
// Audit is pure and total: any input, however malformed, gives a Report.
func Audit(events []event.Event) Report {
	a := &auditor{toolDone: map[string]uint64{}, approval: map[string]Approval{}, stepEnds: map[string]int{}, stepStarted: map[string]bool{}, offered: map[string]bool{}}
	a.r.Events = events
	if len(events) > 0 {
		a.r.Session = events[0].Session
	}
	for _, e := range events {
		a.event(e)
	}
	if cur := a.current(); cur != nil && !cur.Ended() {
		for _, afterTool := range a.openLLM {
			cur.Answering = cur.Answering || afterTool
		}
	}
	return a.r
}

// auditor is Audit's state while it reads the log.
type auditor struct {
	r     Report
	epoch uint64 // of the last claim
	// copied is the number of turns a session.forked copied: the first
	// turn.started of a fork follows them, as Apply numbers it.
	copied int
	// toolDone maps a call id to the seq of its result.
	toolDone    map[string]uint64
	stepEnds    map[string]int
	stepStarted map[string]bool
	// openLLM maps the LLM steps of the current turn without an end to
	// whether they started after a tool result.
	openLLM       map[string]bool
	sawToolResult bool // in the current turn
	// offered holds the digests of the tools.offered so far.
	offered map[string]bool
	// approval maps the calls that needed approval to where they stand.
	approval map[string]Approval
}

func (a *auditor) bad(e event.Event, format string, args ...any) {
	a.r.Problems = append(a.r.Problems, Problem{Session: a.r.Session, Seq: e.Seq, Index: e.Index, Type: e.Type, Epoch: e.Epoch,
		What: fmt.Sprintf(format, args...)})
}

// current is the last turn, or nil before the first.
func (a *auditor) current() *TurnLog {
	if n := len(a.r.Turns); n > 0 {
		return &a.r.Turns[n-1]
	}
	return nil
}

func (a *auditor) event(e event.Event) {
	switch e.Type {
	case event.SessionClaimed:
		a.claim(e)
		return
	case event.SessionCreated, event.SessionForked, event.TurnForked, event.SessionEdited:
		if len(a.r.Claims) > 0 {
			a.bad(e, "after a claim")
		}
		switch e.Type {
		case event.SessionForked:
			if d, err := event.DecodeAs[event.SessionForkedData](e); err == nil {
				a.copied = countUsers(d.Messages) // the fork's turns number on from these
			}
		case event.TurnForked:
			a.turnForked(e)
		}
		return
	}
	a.checkEpoch(e)
	if event.Payload(e.Type) == nil {
		a.bad(e, "unknown event type")
		return
	}
	if e.Type == event.TurnStarted {
		a.turnStarted(e)
		return
	}
	cur := a.current()
	if e.Type == event.TurnReopened {
		a.reopened(e, cur)
		return
	}
	if cur == nil || cur.Ended() {
		a.betweenTurns(e, cur)
		return
	}
	cur.Events = append(cur.Events, e)
	a.step(e)
	if isTurnEnd(e.Type) {
		a.turnEnded(e, cur)
	}
}

// checkEpoch: an event after a claim carries its epoch.
func (a *auditor) checkEpoch(e event.Event) {
	switch {
	case len(a.r.Claims) == 0:
		a.bad(e, "written before any session.claimed")
	case e.Epoch != a.epoch:
		last := a.r.Claims[len(a.r.Claims)-1]
		a.bad(e, "written with epoch %d after the claim of epoch %d (by %s at seq %d): a fenced owner wrote", e.Epoch, a.epoch, last.Node, last.Seq)
	}
}

func (a *auditor) claim(e event.Event) {
	d, err := event.DecodeAs[event.SessionClaimedData](e)
	if err != nil {
		a.bad(e, "%v", err)
		return
	}
	if d.Epoch <= a.epoch {
		a.bad(e, "claims epoch %d after epoch %d", d.Epoch, a.epoch)
	}
	if e.Epoch != d.Epoch {
		a.bad(e, "envelope epoch %d, payload epoch %d", e.Epoch, d.Epoch)
	}
	a.epoch = d.Epoch
	a.r.Claims = append(a.r.Claims, Claim{Seq: e.Seq, Index: e.Index, Epoch: d.Epoch, Node: d.Node})
	if cur := a.current(); cur != nil && !cur.Ended() {
		cur.Claims++
	}
}

func (a *auditor) turnStarted(e event.Event) {
	d, err := event.DecodeAs[event.TurnStartedData](e)
	if err != nil {
		a.bad(e, "%v", err)
		return
	}
	if cur := a.current(); cur != nil && !cur.Ended() {
		a.bad(e, "turn %d starts while turn %d (input %s) has not ended", d.Turn, cur.Turn, cur.InputID)
	}
	if want := a.copied + len(a.r.Turns) + 1; d.Turn != want {
		a.bad(e, "turn %d, want %d", d.Turn, want)
	}
	a.r.Turns = append(a.r.Turns, TurnLog{Turn: d.Turn, InputID: d.InputID, Start: e})
	a.sawToolResult = false
	a.openLLM = map[string]bool{}
}

// turnForked opens the turn a fork inside a turn copied: its own events
// follow, as a resumed turn's.
func (a *auditor) turnForked(e event.Event) {
	d, err := event.DecodeAs[event.TurnForkedData](e)
	if err != nil {
		a.bad(e, "%v", err)
		return
	}
	if want := a.copied + len(a.r.Turns) + 1; d.Turn != want || len(a.r.Turns) > 0 {
		a.bad(e, "forked turn %d, want %d, the fork's first", d.Turn, want)
	}
	a.r.Turns = append(a.r.Turns, TurnLog{Turn: d.Turn, Start: e})
	a.sawToolResult = false
	a.openLLM = map[string]bool{}
}

// betweenTurns checks an event outside any turn: before the first (cur is nil)
// or after cur's end.
func (a *auditor) betweenTurns(e event.Event, cur *TurnLog) {
	switch e.Type {
	case event.CheckpointCreated, event.ContextCompacted, event.ContextCompactFailed, event.SummaryAdded, event.ArtifactCreated, event.BudgetSet:
		return
	case event.ToolFinished:
		// The repair before a new turn: a result for a call the last turn's
		// cancel left open.
		if d, err := event.DecodeAs[event.ToolFinishedData](e); err == nil && d.Code == event.CodeNotExecuted && cur != nil {
			a.step(e)
			return
		}
	}
	if cur == nil {
		a.bad(e, "before any turn")
		return
	}
	a.bad(e, "in turn %d (input %s) after its %s at seq %d", cur.Turn, cur.InputID, cur.Ends[0].Type, cur.Ends[0].Seq)
	if isTurnEnd(e.Type) {
		cur.Ends = append(cur.Ends, e)
	}
}

// reopened checks a turn.reopened: it follows the end of the turn it
// names, an agent.failed of code budget_exceeded, which it takes back.
func (a *auditor) reopened(e event.Event, cur *TurnLog) {
	d, err := event.DecodeAs[event.TurnReopenedData](e)
	switch {
	case err != nil:
		a.bad(e, "%v", err)
		return
	case cur == nil || !cur.Ended():
		a.bad(e, "reopens a turn that has not ended")
		return
	case d.Turn != cur.Turn:
		a.bad(e, "reopens turn %d, the last turn is %d", d.Turn, cur.Turn)
		return
	}
	end := cur.Ends[len(cur.Ends)-1]
	if f, err := event.DecodeAs[event.AgentFailedData](end); err != nil || end.Type != event.AgentFailed || f.Code != event.CodeBudgetExceeded {
		a.bad(e, "reopens turn %d, which ended with %s at seq %d, not failed at its budget", cur.Turn, end.Type, end.Seq)
		return
	}
	cur.Ends = nil
	cur.Reopened = append(cur.Reopened, e)
	cur.Events = append(cur.Events, e)
}

// steered checks a turn.steered: it names the running turn, and its input
// joined no turn before (a steer redelivered after a crash is not added
// twice) nor started one.
func (a *auditor) steered(e event.Event) {
	d, err := event.DecodeAs[event.TurnSteeredData](e)
	cur := a.current()
	switch {
	case err != nil:
		a.bad(e, "%v", err)
		return
	case d.Turn != cur.Turn:
		a.bad(e, "steers turn %d while turn %d runs", d.Turn, cur.Turn)
	}
	if d.InputID == "" {
		return
	}
	for _, t := range a.r.Turns {
		if t.InputID == d.InputID || slices.Contains(t.Steers, d.InputID) {
			a.bad(e, "input %s steers turn %d, but it started or steered turn %d before", d.InputID, d.Turn, t.Turn)
			break
		}
	}
	cur.Steers = append(cur.Steers, d.InputID)
}

// step checks an LLM or tool step's event.
func (a *auditor) step(e event.Event) {
	switch e.Type {
	case event.LLMStarted:
		d, err := event.DecodeAs[event.LLMStartedData](e)
		if err != nil {
			a.bad(e, "%v", err)
			return
		}
		if d.ToolsDigest != "" && !a.offered[d.ToolsDigest] {
			a.bad(e, "step %s offers the tools of digest %s, which no tools.offered before it records", d.StepID, d.ToolsDigest)
		}
		a.stepStarted[d.StepID] = true
		a.openLLM[d.StepID] = a.sawToolResult
	case event.ToolsOffered:
		if d, err := event.DecodeAs[event.ToolsOfferedData](e); err != nil {
			a.bad(e, "%v", err)
		} else {
			a.offered[d.Digest] = true
		}
	case event.LLMCompleted:
		d, err := event.DecodeAs[event.LLMCompletedData](e)
		a.llmEnded(e, d.StepID, err)
	case event.LLMFailed:
		d, err := event.DecodeAs[event.LLMFailedData](e)
		a.llmEnded(e, d.StepID, err)
	case event.ToolStarted:
		d, err := event.DecodeAs[event.ToolStartedData](e)
		if err != nil {
			a.bad(e, "%v", err)
			return
		}
		if at, ok := a.toolDone[d.Call.ID]; ok {
			a.bad(e, "tool call %s (%s) starts again after its tool.finished at seq %d", d.Call.ID, d.Call.Name, at)
		}
		a.startApproved(e, d.Call.ID)
	case event.ToolApprovalRequested, event.ToolApproved, event.ToolDenied:
		a.auditApproval(e)
	case event.TurnSteered:
		a.steered(e)
	case event.ToolWaiting:
		d, err := event.DecodeAs[event.ToolWaitingData](e)
		if err != nil {
			a.bad(e, "%v", err)
			return
		}
		if at, ok := a.toolDone[d.CallID]; ok {
			a.bad(e, "tool call %s (%s) waits for its service after its tool.finished at seq %d", d.CallID, d.Name, at)
		}
	case event.ToolFinished:
		d, err := event.DecodeAs[event.ToolFinishedData](e)
		if err != nil {
			a.bad(e, "%v", err)
			return
		}
		if at, ok := a.toolDone[d.CallID]; ok {
			a.bad(e, "tool call %s (%s) finished a second time (first at seq %d)", d.CallID, d.Name, at)
			return
		}
		a.toolDone[d.CallID] = e.Seq
		a.sawToolResult = true
	}
}

func (a *auditor) llmEnded(e event.Event, step string, err error) {
	if err != nil {
		a.bad(e, "%v", err)
		return
	}
	if !a.stepStarted[step] {
		a.bad(e, "step %s never started", step)
	}
	if a.stepEnds[step]++; a.stepEnds[step] > 1 {
		a.bad(e, "step %s ends a second time", step)
	}
	delete(a.openLLM, step)
}

// turnEnded records cur's end e; a turn that finished or failed must have a
// result for every call that started in it.
func (a *auditor) turnEnded(e event.Event, cur *TurnLog) {
	cur.Ends = append(cur.Ends, e)
	if e.Type == event.AgentCancelled {
		return
	}
	for _, te := range cur.Events {
		if te.Type != event.ToolStarted {
			continue
		}
		d, err := event.DecodeAs[event.ToolStartedData](te)
		if err != nil {
			continue // reported at te
		}
		if _, ok := a.toolDone[d.Call.ID]; !ok {
			a.bad(e, "turn %d ended while tool call %s (%s, started at seq %d) has no result", cur.Turn, d.Call.ID, d.Call.Name, te.Seq)
		}
	}
}

func isTurnEnd(t event.Type) bool {
	return t == event.AgentFinished || t == event.AgentFailed || t == event.AgentCancelled
}
