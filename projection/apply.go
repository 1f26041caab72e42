package projection

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// Errors of Apply. Each wraps the event's position; event.ErrUnknownType and
// event.ErrMalformed come from decoding the payload.
var (
	// ErrOutOfOrder: an event that is not after the last one folded (by
	// sequence, then index in its record), such as a duplicate delivery.
	// Folding it again would count it twice.
	ErrOutOfOrder = errors.New("event out of order")
	// ErrWrongSession: an event of another session.
	ErrWrongSession = errors.New("event of another session")
	// ErrInconsistent: an event that contradicts the history folded so far, such as
	// a tool result for a call nobody made, or a step that does not exist.
	ErrInconsistent = errors.New("event inconsistent with the history")
)

// Apply folds one event into s, in place. On error s is left exactly as it was
// (every rule is checked before anything changes), so a reader of the log may
// report the event and go on with the next one. s may share slices with earlier
// copies of itself: take a snapshot with State.Clone.
func Apply(s *State, e event.Event) error {
	return applyEvent(s, e, nil, false)
}

// ApplyTyped is Apply of an event whose writer still holds its payload p
// (the value event.New made e of): it folds what e.Typed(p) gives, p itself
// unless decoding e.Data would not give p back, so that the result is
// Apply's, byte for byte, without decoding what was just encoded. The state
// may keep parts of p (its slices, maps and pointers): p must not change
// afterwards. A session's owner folds each event it writes with it.
func ApplyTyped(s *State, e event.Event, p any) error {
	return applyEvent(s, e, p, true)
}

// ApplyDecoded is Apply of an event whose payload its caller decoded
// already: p must be what e.Decode() returned (a reader that needs a field
// of the payload before the fold, as the read model does, decodes it once).
func ApplyDecoded(s *State, e event.Event, p any) error {
	return applyWith(s, e, func() (any, error) { return p, nil })
}

func applyEvent(s *State, e event.Event, p any, typed bool) error {
	if typed {
		return applyWith(s, e, func() (any, error) { return e.Typed(p) })
	}
	return applyWith(s, e, e.Decode)
}

// applyWith folds e, its payload given by payload, once the event is known
// to come next.
func applyWith(s *State, e event.Event, payload func() (any, error)) error {
	if e.Seq != 0 && !(event.Event{Seq: s.LastSeq, Index: s.LastIndex}).Before(e) {
		return fmt.Errorf("event %d.%d %q after %d.%d: %w", e.Seq, e.Index, e.Type, s.LastSeq, s.LastIndex, ErrOutOfOrder)
	}
	if s.ID != "" && e.Session != s.ID {
		return fmt.Errorf("event %d %q of session %q folded into %q: %w", e.Seq, e.Type, e.Session, s.ID, ErrWrongSession)
	}
	p, err := payload()
	if err != nil {
		return err
	}
	if err := apply(s, e, p); err != nil {
		return fmt.Errorf("event %d %q: %w", e.Seq, e.Type, err)
	}
	if e.Seq != 0 {
		s.LastSeq, s.LastIndex = e.Seq, e.Index
	}
	s.Events++
	if !e.Time.IsZero() {
		s.UpdatedAt = e.Time
	}
	return nil
}

// Fold folds events into a new State. Events that cannot be folded are skipped;
// the returned error joins what was wrong with each of them (nil when nothing was).
func Fold(events []event.Event) (State, error) {
	var s State
	err := FoldInto(&s, events)
	return s, err
}

// FoldInto folds events into s, as Fold does, for a snapshot and its tail.
func FoldInto(s *State, events []event.Event) error {
	var errs []error
	for _, e := range events {
		if err := Apply(s, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func apply(s *State, e event.Event, payload any) error {
	if s.ID == "" && e.Type != event.SessionCreated {
		return fmt.Errorf("session has no session.created yet: %w", ErrInconsistent)
	}
	switch d := payload.(type) {
	case *event.SessionCreatedData:
		if s.ID != "" {
			return fmt.Errorf("session already created: %w", ErrInconsistent)
		}
		s.ID = e.Session
		s.Config = d.Config
		s.ForkedFrom = d.ForkedFrom
		s.Labels = d.Labels
		s.Parent, s.Definition = d.Parent, d.Definition
		s.Status = StatusIdle
		s.CreatedAt = e.Time
		s.Messages = ReplaceSystemPrompt(nil, d.Config.SystemPrompt)
		if d.Budget != nil {
			s.Budget = *d.Budget
		}
		s.Steps, s.ToolCalls = []Step{}, []ToolCallRecord{}
		s.Artifacts, s.Checkpoints = []Artifact{}, []Checkpoint{}

	case *event.SessionForkedData:
		if s.Turn != 0 || len(s.Steps) != 0 {
			return fmt.Errorf("fork copy after the session began: %w", ErrInconsistent)
		}
		if err := llm.CheckPairing(d.Messages); err != nil {
			return fmt.Errorf("forked messages: %w: %v", ErrInconsistent, err)
		}
		s.ForkedFrom = d.From
		s.Messages = llm.CloneMessages(d.Messages)
		s.Turn = countUsers(s.Messages)

	case *event.TurnForkedData:
		return s.applyTurnForked(d)

	case *event.SessionEditedData:
		return s.applyEdit(d)

	case *event.SessionClaimedData:
		if d.Epoch <= s.Epoch {
			return fmt.Errorf("epoch %d is not after %d: %w", d.Epoch, s.Epoch, ErrInconsistent)
		}
		s.Epoch, s.Node, s.Config = d.Epoch, d.Node, d.Config
		held := len(s.Messages)
		s.Messages = ReplaceSystemPrompt(s.Messages, d.Config.SystemPrompt)
		if s.Elided.Messages > 0 {
			s.Elided.At += len(s.Messages) - held // the preamble before the gap changed
		}

	case *event.TurnStartedData:
		if s.Status.Active() {
			return fmt.Errorf("turn %d starts while turn %d is %s: %w", d.Turn, s.Turn, s.Status, ErrInconsistent)
		}
		// Turns are numbered 1, 2, 3... (after a fork, on from the turns it
		// copied): the owner writes the last turn + 1, so any other number, a
		// repeat or a gap, is a log that no sound owner wrote.
		if d.Turn != s.Turn+1 {
			return fmt.Errorf("turn %d does not follow turn %d: %w", d.Turn, s.Turn, ErrInconsistent)
		}
		s.Turn, s.TurnLLMCalls, s.TurnUsage, s.TurnCompactTried, s.LastInputID = d.Turn, 0, llm.Usage{}, false, d.InputID
		s.TurnCost = pricing.Cost{}
		s.TurnMaxSteps, s.TurnCaller, s.TurnTrace = d.MaxSteps, d.Caller, d.Trace
		s.TurnBudget, s.TurnTimeMS, s.TurnRunningSince, s.LastBudget, s.LastQuota = event.Limits{}, 0, e.Time, nil, nil
		if d.Budget != nil {
			s.TurnBudget = *d.Budget
		}
		s.rememberInput(d.InputID)
		s.TurnSteers, s.TurnSteerCallers = nil, nil
		s.Status = StatusRunning
		s.Messages = append(s.Messages, d.Message.Clone())
		s.noteDefinition(d.Turn, d.Definition)

	case *event.LLMStartedData:
		if err := s.needActive(); err != nil {
			return err
		}
		if s.Step(d.StepID) != nil {
			return fmt.Errorf("step %q exists: %w", d.StepID, ErrInconsistent)
		}
		var ref *event.RequestRef // none in a log that recorded requests whole
		if d.RequestSHA256 != "" {
			ref = &d.RequestRef
		}
		s.addStep(Step{ID: d.StepID, Type: StepLLM, Turn: s.Turn, Status: StepPending,
			RequestRef: ref, Trim: d.Trim, StartSeq: e.Seq, StartedAt: e.Time})
		s.TurnLLMCalls++
		s.Status = StatusRunning

	case *event.ToolsOfferedData:
		s.ToolsOffered = d.Digest

	case *event.LLMStreamingData:
		st, err := s.openStep(d.StepID, StepLLM)
		if err != nil {
			return err
		}
		st.Status = StepStreaming

	case *event.LLMCompletedData:
		st, err := s.openStep(d.StepID, StepLLM)
		if err != nil {
			return err
		}
		resp := d.Response
		resp.ToolCalls = resp.Message().ToolCalls
		st.Status, st.Response, st.Artifact = StepCompleted, &resp, d.Artifact
		s.endStep(st, e, d.DurationMS)
		s.Usage, s.TurnUsage = s.Usage.Add(resp.Usage), s.TurnUsage.Add(resp.Usage)
		if d.Cost != nil {
			c := *d.Cost
			st.Cost = &c
			s.Cost, s.TurnCost = s.Cost.Add(c), s.TurnCost.Add(c)
		}
		s.Messages = append(s.Messages, resp.Message())
		for _, c := range resp.ToolCalls {
			s.ToolCalls = append(s.ToolCalls, ToolCallRecord{CallID: c.ID, Name: c.Name,
				Arguments: c.Arguments, Turn: s.Turn, Status: StepPending})
		}

	case *event.LLMFailedData:
		st, err := s.openStep(d.StepID, StepLLM)
		if err != nil {
			return err
		}
		st.Status, st.Error, st.Code = StepFailed, d.Error, d.Code
		s.endStep(st, e, d.DurationMS)

	case *event.ThinkingData:
		if s.Step(d.StepID) != nil {
			return fmt.Errorf("step %q exists: %w", d.StepID, ErrInconsistent)
		}
		s.addStep(Step{ID: d.StepID, Type: StepThinking, Turn: s.Turn, Status: StepCompleted,
			Content: d.Content, StartSeq: e.Seq, EndSeq: e.Seq, StartedAt: e.Time, EndedAt: e.Time})

	case *event.ToolStartedData:
		if err := s.needActive(); err != nil {
			return err
		}
		if s.Step(d.StepID) != nil {
			return fmt.Errorf("step %q exists: %w", d.StepID, ErrInconsistent)
		}
		rec := s.ToolCall(d.Call.ID)
		if rec == nil {
			return fmt.Errorf("tool call %q was never requested: %w", d.Call.ID, ErrInconsistent)
		}
		if rec.Status.Done() {
			return fmt.Errorf("tool call %q has ended: %w", d.Call.ID, ErrInconsistent)
		}
		if rec.Approval == ApprovalRequested || rec.Approval == ApprovalDenied {
			return fmt.Errorf("tool call %q starts without approval (%s): %w", d.Call.ID, rec.Approval, ErrInconsistent)
		}
		rec.StepID, rec.Status = d.StepID, StepRunning
		child, _ := strings.CutPrefix(d.Runner, event.AgentRunnerPrefix)
		if child == d.Runner {
			child = ""
		}
		s.addStep(Step{ID: d.StepID, Type: StepTool, Turn: s.Turn, Status: StepRunning,
			Tool: d.Call.Name, CallID: d.Call.ID, Input: d.Call.Arguments, Idempotent: d.Idempotent, Child: child,
			StartSeq: e.Seq, StartedAt: e.Time})
		s.Status = StatusWaitingTool

	case *event.ToolWaitingData:
		// The call waits for its service: its step stays running (the
		// session waiting_tool) until its tool.finished.
		if st := s.Step(d.StepID); st == nil || st.Type != StepTool || st.Status.Done() {
			return fmt.Errorf("tool.waiting of step %q, which is not a running tool step: %w", d.StepID, ErrInconsistent)
		}

	case *event.ToolApprovalRequestedData, *event.ToolApprovedData, *event.ToolDeniedData:
		return s.applyApproval(e, d)

	case *event.ToolFinishedData:
		if err := s.finishTool(e, d); err != nil {
			return err
		}
		s.settleApprovals()

	case *event.AgentFinishedData:
		if err := s.needActive(); err != nil {
			return err
		}
		s.AwaitingApproval, s.ApprovalDeadline = false, time.Time{}
		s.Status, s.LastOutput, s.LastError, s.LastCode = StatusCompleted, d.Content, "", ""
		s.turnStopped(e)

	case *event.AgentFailedData:
		if err := s.needActive(); err != nil {
			return err
		}
		s.AwaitingApproval, s.ApprovalDeadline = false, time.Time{}
		s.Status, s.LastError, s.LastCode, s.LastBudget, s.LastQuota = StatusFailed, d.Error, d.Code, d.Budget, d.Quota
		s.failOpenSteps(e, d.Code, d.Error)
		s.turnStopped(e)

	case *event.AgentCancelledData:
		if err := s.needActive(); err != nil {
			return err
		}
		s.AwaitingApproval, s.ApprovalDeadline = false, time.Time{}
		s.Status, s.LastError, s.LastCode = StatusCancelled, d.Reason, event.CodeCancelled
		s.failOpenSteps(e, event.CodeCancelled, "cancelled")
		s.turnStopped(e)

	case *event.BudgetSetData:
		s.Budget, s.TurnBudget = d.Budget, d.TurnLimits

	case *event.TurnReopenedData:
		if s.Status != StatusFailed || s.LastCode != event.CodeBudgetExceeded || d.Turn != s.Turn {
			return fmt.Errorf("turn %d reopened, but the last turn is %d, %s (%s), not failed at its budget: %w", d.Turn, s.Turn, s.Status, s.LastCode, ErrInconsistent)
		}
		s.Status, s.LastError, s.LastCode, s.LastBudget, s.TurnRunningSince = StatusRunning, "", "", nil, e.Time

	case *event.TurnSteeredData:
		if err := s.needActive(); err != nil {
			return err
		}
		if d.Turn != s.Turn {
			return fmt.Errorf("turn %d steered while turn %d runs: %w", d.Turn, s.Turn, ErrInconsistent)
		}
		s.rememberInput(d.InputID)
		s.TurnSteers = append(s.TurnSteers, d.InputID)
		if d.Caller != nil {
			s.TurnSteerCallers = append(s.TurnSteerCallers, *d.Caller)
		}
		s.Messages = append(s.Messages, d.Message.Clone())

	case *event.ContextTrimmedData:
		s.Trims++

	case *event.ContextCompactedData:
		if d.Auto {
			s.TurnCompactTried = true
		}
		return s.addCompactionStep(e, d.CompactionCall, StepCompleted, "", "")

	case *event.ContextCompactFailedData:
		if d.Auto {
			s.TurnCompactTried = true
		}
		return s.addCompactionStep(e, d.CompactionCall, StepFailed, d.Error, d.Code)

	case *event.SummaryAddedData:
		at := d.At
		if at < 0 || at > s.HistoryLen() {
			at = s.HistoryLen()
		}
		if e := s.Elided; e.Messages > 0 {
			if at < e.At+e.Messages {
				return fmt.Errorf("summary at %d, in the history's elided part: %w", at, ErrHistoryNeeded)
			}
			at -= e.Messages
		}
		if insideToolBlock(s.Messages, at) {
			return fmt.Errorf("summary at %d would separate tool calls from their results: %w", at, ErrInconsistent)
		}
		s.insertMessage(at, llm.System(d.Content))
		s.Summaries++

	case *event.CheckpointCreatedData:
		s.Checkpoints = append(s.Checkpoints, Checkpoint{CheckpointCreatedData: *d, Seq: e.Seq})

	case *event.ArtifactCreatedData:
		s.Artifacts = append(s.Artifacts, Artifact{ArtifactCreatedData: *d, Seq: e.Seq})

	default:
		return fmt.Errorf("no fold for payload %T: %w", payload, event.ErrUnknownType)
	}
	return nil
}

// turnStopped counts the time the turn ran since it last started running
// (turn.started, turn.reopened), to its end e, in the turn's and the
// session's.
func (s *State) turnStopped(e event.Event) {
	if !s.TurnRunningSince.IsZero() && e.Time.After(s.TurnRunningSince) {
		ms := e.Time.Sub(s.TurnRunningSince).Milliseconds()
		s.TurnTimeMS += ms
		s.TimeMS += ms
	}
	s.TurnRunningSince = time.Time{}
}

// finishTool records a tool result: it closes the step (if the call started),
// updates the call's record, and inserts the result message right after the
// assistant message that made the call and the results already there, so that a
// result given late (repair after a cancel) still sits with its call.
func (s *State) finishTool(e event.Event, d *event.ToolFinishedData) error {
	rec := s.ToolCall(d.CallID)
	if rec == nil {
		return fmt.Errorf("tool call %q was never requested: %w", d.CallID, ErrInconsistent)
	}
	if rec.HasResult {
		return fmt.Errorf("tool call %q already has a result: %w", d.CallID, ErrInconsistent)
	}
	at := resultIndex(s.Messages, d.CallID)
	if at < 0 {
		return fmt.Errorf("no assistant message holds tool call %q: %w", d.CallID, ErrInconsistent)
	}
	status := StepCompleted
	if d.IsError {
		status = StepFailed
	}
	if rec.StepID != "" {
		st := s.Step(rec.StepID)
		if st == nil {
			return fmt.Errorf("tool step %q is missing: %w", rec.StepID, ErrInconsistent)
		}
		wasOpen := !st.Status.Done()
		st.Status, st.Output, st.Code, st.Artifact = status, d.Output, d.Code, d.Artifact
		if d.IsError {
			st.Error = d.Output
		}
		if wasOpen {
			s.endStep(st, e, d.DurationMS)
		}
	}
	rec.Status, rec.IsError, rec.Code, rec.HasResult = status, d.IsError, d.Code, true
	name := d.Name
	if name == "" {
		name = rec.Name
	}
	msg := llm.Message{Role: llm.RoleTool, ToolCallID: d.CallID, Name: name, Content: d.Output, IsError: d.IsError}
	s.insertMessage(at, msg)
	if s.Status == StatusWaitingTool && !s.toolRunning() {
		s.Status = StatusRunning
	}
	return nil
}

// insertMessage puts m at index at of s.Messages. Before the end, it makes
// a new array instead of moving the messages after at in place: once a
// message is in s.Messages, nothing writes its place again, so that a
// request may send the history without copying it, and its size may be
// counted once (State.prepare).
func (s *State) insertMessage(at int, m llm.Message) {
	if at == len(s.Messages) {
		s.Messages = append(s.Messages, m)
		return
	}
	msgs := make([]llm.Message, 0, len(s.Messages)+1+len(s.Messages)/4)
	msgs = append(msgs, s.Messages[:at]...)
	msgs = append(msgs, m)
	s.Messages = append(msgs, s.Messages[at:]...)
}

// resultIndex is where the result of callID goes: after the assistant message that
// made the call and the tool results that follow it. -1 when no message made it.
func resultIndex(msgs []llm.Message, callID string) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		for _, c := range msgs[i].ToolCalls {
			if c.ID == callID {
				j := i + 1
				for j < len(msgs) && msgs[j].Role == llm.RoleTool {
					j++
				}
				return j
			}
		}
	}
	return -1
}

// insideToolBlock reports whether inserting at index at would land between an
// assistant message with tool calls and its results.
func insideToolBlock(msgs []llm.Message, at int) bool {
	if at <= 0 || at > len(msgs) {
		return false
	}
	if at < len(msgs) && msgs[at].Role == llm.RoleTool {
		return true
	}
	return false
}

func (s *State) needActive() error {
	if !s.Status.Active() {
		return fmt.Errorf("no turn is running (session is %s): %w", s.Status, ErrInconsistent)
	}
	return nil
}

func (s *State) openStep(id string, typ StepType) (*Step, error) {
	st := s.Step(id)
	if st == nil {
		return nil, fmt.Errorf("step %q does not exist: %w", id, ErrInconsistent)
	}
	if st.Type != typ {
		return nil, fmt.Errorf("step %q is a %s step, not %s: %w", id, st.Type, typ, ErrInconsistent)
	}
	if st.Status.Done() {
		return nil, fmt.Errorf("step %q has already ended: %w", id, ErrInconsistent)
	}
	return st, nil
}

func (s *State) endStep(st *Step, e event.Event, durationMS int64) {
	st.EndSeq, st.EndedAt, st.DurationMS = e.Seq, e.Time, durationMS
	if durationMS == 0 && !st.StartedAt.IsZero() && !e.Time.IsZero() {
		st.DurationMS = e.Time.Sub(st.StartedAt).Milliseconds()
	}
}

// toolRunning reports whether a tool step of the current turn is still open;
// only the current turn's steps can be, so the scan stops at the turn's start,
// or at the steps known to have ended (doneBefore), so that a tool result
// costs the same however many steps the turn has made.
func (s *State) toolRunning() bool {
	for i := len(s.Steps) - 1; i >= s.doneBefore() && s.Steps[i].Turn == s.Turn; i-- {
		if s.Steps[i].Type == StepTool && !s.Steps[i].Status.Done() {
			return true
		}
	}
	return false
}

// doneBefore is an index of Steps before which every step has ended: it
// moves on over the steps that have ended since it was last asked (a step
// that has ended never opens again), from the start when Steps were
// replaced.
func (s *State) doneBefore() int {
	if s.done > len(s.Steps) {
		s.done = 0
	}
	for s.done < len(s.Steps) && s.Steps[s.done].Status.Done() {
		s.done++
	}
	return s.done
}

// failOpenSteps ends the steps a failed or cancelled turn left open. Their tool
// calls keep no result: the next run repairs them with "not executed".
func (s *State) failOpenSteps(e event.Event, code, msg string) {
	for i := len(s.Steps) - 1; i >= 0 && s.Steps[i].Turn == s.Turn; i-- {
		st := &s.Steps[i]
		if st.Status.Done() {
			continue
		}
		st.Status, st.Code, st.Error = StepFailed, code, msg
		s.endStep(st, e, 0)
		if st.Type == StepTool {
			if rec := s.ToolCall(st.CallID); rec != nil {
				rec.Status, rec.Code = StepFailed, code
			}
		}
	}
}

// countUsers counts the turns msgs hold: their user messages that start one
// (a steer joined the turn before it).
func countUsers(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		if m.StartsTurn() {
			n++
		}
	}
	return n
}
