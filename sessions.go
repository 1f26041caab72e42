package tah

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

// SessionState is the specification's SessionState.
type SessionState = projection.Status

// The session states.
const (
	StateIdle        = projection.StatusIdle
	StateRunning     = projection.StatusRunning
	StateWaitingTool = projection.StatusWaitingTool
	StateCompleted   = projection.StatusCompleted
	StateFailed      = projection.StatusFailed
	StateCancelled   = projection.StatusCancelled
)

// RunResult is how a turn ended.
type RunResult struct {
	Session string       `json:"session"`
	Turn    int          `json:"turn"`
	State   SessionState `json:"state"`
	// Content is the final answer of a completed turn.
	Content string `json:"content,omitempty"`
	// Error and Code explain a failed or cancelled turn (Code is an event.Code*
	// value such as "max_steps", "provider" or "cancelled").
	Error string    `json:"error,omitempty"`
	Code  string    `json:"code,omitempty"`
	Steps int       `json:"steps"`
	Usage llm.Usage `json:"usage"`
	// Cost is what the turn's LLM calls cost, in US dollars, at the prices
	// of the node that made them (Cost.Unpriced counts the calls of a model
	// without a price).
	Cost pricing.Cost `json:"cost"`
	// Budget, on a turn that failed with Code budget_exceeded, is the limit
	// it reached and at what figure; SetBudget raises it, and Resume runs
	// the turn on.
	Budget *BudgetReached `json:"budget,omitempty"`
	// AwaitingApproval, on a turn that waits (State waiting_tool), are the
	// calls that wait for Approve or Deny (see the Approval plugin).
	AwaitingApproval []llm.ToolCall `json:"awaiting_approval,omitempty"`
}

// Budgets limit what a turn and a session may spend: tokens (input plus
// output), cost in US dollars and wall time. Three sources set limits: the
// node's (AgentOptions.Budget, tah-node's agent.budget), the session's own
// (CreateOptions.Budget, then SetBudget) and a turn's own (WithBudget); for
// each limit the tightest is in force. A turn that reaches one fails with
// Code budget_exceeded and RunResult.Budget says which; SetBudget raises it
// and Resume runs the same turn on.

// Budget is a set of limits per turn and for the session; a zero limit is
// none.
type Budget = event.Budget

// Limits are the limits of one scope (a turn, or a session's turns
// together): Tokens, CostUSD and TimeMS; zero is no limit.
type Limits = event.Limits

// BudgetReached says which limit a turn reached (its scope, kind and
// where it was set) and at what figure; its String says it for a person.
type BudgetReached = event.BudgetReached

// BudgetChange is what SetBudget changes, per turn and for the session: a
// limit given (new(int64(100_000)), say) replaces it, 0 removes it, nil
// keeps it.
type BudgetChange = wire.BudgetChange

// LimitsChange is the limits a BudgetChange changes in one scope.
type LimitsChange = wire.LimitsChange

// SessionBudget is a session's limits in force, each with what its scope
// has spent, and the limit its last turn reached (Session.Budget).
type SessionBudget = wire.SessionBudget

// RunOption is a setting of one turn (Run, RunMessage).
type RunOption func(*wire.RunOptions)

// WithBudget gives the turn limits of its own (tokens, cost, time), beside
// the session's budget and the node's: the tightest of each is in force. A
// negative limit fails the Run (ErrMalformedInput) before anything is sent.
func WithBudget(l Limits) RunOption { return func(o *wire.RunOptions) { o.Budget = &l } }

// WithMaxSteps allows the turn at most n LLM calls, instead of the
// session's maxSteps.
func WithMaxSteps(n int) RunOption { return func(o *wire.RunOptions) { o.MaxSteps = n } }

// WithSteer sends the input to the session's running turn instead of
// waiting for the turn to end: it joins the turn before its next LLM call
// (the model sees it without the turn ending), and Run returns that turn's
// result. A turn waiting for approval takes it after the decision; when the
// turn can take it no more (it is answering, or has ended), or the session
// is idle, the input runs as a turn of its own, ahead of those queued.
func WithSteer() RunOption {
	return func(o *wire.RunOptions) { o.WhenBusy = wire.WhenBusySteer }
}

// WithInterrupt cancels the session's running turn (or the one waiting for
// approval), every call paired, and runs the input's turn right after,
// ahead of those queued. The cancelled turn's result says it was
// interrupted by this input.
func WithInterrupt() RunOption {
	return func(o *wire.RunOptions) { o.WhenBusy = wire.WhenBusyInterrupt }
}

// Decision is what Approve or Deny decides: the calls (all that wait when
// empty), a note, edited arguments for an approve of one call, and who
// decides (informative).
type Decision = wire.Decision

// CompactResult is what Compact returns: the turns summarised and the summary's size.
type CompactResult = wire.CompactResult

// SessionSummary is one row of List.
type SessionSummary = wire.SessionSummary

// SessionService is the specification's SessionService. Its calls go
// through the API of the node (tah.api.*), like any client's.
type SessionService struct{ rt *Runtime }

// Create makes a new session (session.created) with the node's agent
// configuration.
func (ss *SessionService) Create(ctx context.Context) (*Session, error) {
	return ss.CreateWith(ctx, CreateOptions{})
}

// CreateOptions are a new session's own settings.
type CreateOptions struct {
	// Labels are free-form tags, shown by List (see wire.CheckLabels for
	// their limits).
	Labels map[string]string
	// Budget is the session's own budget: limits on each of its turns and
	// on its turns together. The node's (AgentOptions.Budget), when
	// tighter, still wins; SetBudget changes it later.
	Budget *Budget
	// Tenant makes it a session of that tenant: its id is <tenant>.s_…
	// (docs/tenancy.md). Empty: the default tenant's.
	Tenant string
}

// CreateWith is Create with a session's own settings. Labels over their
// limits, a negative limit or a tenant's name that is not one, fail it
// with ErrBadRequest.
func (ss *SessionService) CreateWith(ctx context.Context, opts CreateOptions) (*Session, error) {
	c, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	r, err := c.Create(ctx, wire.CreateRequest{Tenant: opts.Tenant, Labels: opts.Labels, Budget: opts.Budget})
	if err != nil {
		return nil, fmt.Errorf("tah: create: %w", err)
	}
	return &Session{id: r.Session, rt: ss.rt}, nil
}

// Get returns the session with this id, known to the read model or, when the
// read model has not seen it yet, to the log. It fails with ErrNotFound.
func (ss *SessionService) Get(ctx context.Context, id string) (*Session, error) {
	c, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	if _, err := c.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("tah: get %s: %w", id, err)
	}
	return &Session{id: id, rt: ss.rt}, nil
}

// List yields every session, most recently updated first, a page at a time
// (ListPage). It stops at the first error, which it yields with a zero
// summary.
func (ss *SessionService) List(ctx context.Context) iter.Seq2[SessionSummary, error] {
	return func(yield func(SessionSummary, error) bool) {
		req := wire.ListRequest{Limit: wire.ListMax}
		for {
			p, err := ss.ListPage(ctx, req)
			if err != nil {
				yield(SessionSummary{}, err)
				return
			}
			for _, s := range p.Sessions {
				if !yield(s, nil) {
					return
				}
			}
			if p.Next == "" {
				return
			}
			req.Before = p.Next
		}
	}
}

// ListPage returns one page of sessions, newest first: req.Before is the
// Next of the page before.
func (ss *SessionService) ListPage(ctx context.Context, req wire.ListRequest) (wire.ListReply, error) {
	c, err := ss.rt.running()
	if err != nil {
		return wire.ListReply{}, err
	}
	p, err := c.List(ctx, req)
	if err != nil {
		return p, fmt.Errorf("tah: list: %w", err)
	}
	return p, nil
}

// ForkOptions: Turns keeps the first N turns (0: only the system message);
// nil keeps them all. AtStep (a step's id; not with Turns) ends the copy
// right after that step instead, inside its turn when the turn went on
// there: the fork's turn is then open, and Session.Resume runs it on. Edit
// replaces one message of the copy (a tool result, an answer, a user's
// message), recorded in the fork's log with who edited (Edit.By).
type ForkOptions struct {
	Turns  *int
	AtStep string
	Edit   *wire.ForkEdit
}

// Fork copies the messages of session id into a new session (specification
// v0.22); the source is unchanged. It fails with ErrNotFound.
func (ss *SessionService) Fork(ctx context.Context, id string, opts ForkOptions) (*Session, error) {
	c, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	if opts.Turns != nil && *opts.Turns < 0 {
		return nil, errors.New("tah: fork: turns is negative")
	}
	r, err := c.Fork(ctx, wire.ForkRequest{Session: id, Turns: opts.Turns, AtStep: opts.AtStep, Edit: opts.Edit})
	if err != nil {
		return nil, fmt.Errorf("tah: fork %s: %w", id, err)
	}
	return &Session{id: r.Session, rt: ss.rt}, nil
}

// Session is the specification's Session: a handle on one durable session.
// Its methods go through the log and the API, so they work whichever node
// owns it. It is safe for concurrent use.
type Session struct {
	id string
	rt *Runtime

	// folded is the session's state as far as this handle has read its log:
	// State and Snapshot read only what was appended since.
	mu     sync.Mutex
	folded projection.State
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// State is the session's current state, as its log says now.
func (s *Session) State(ctx context.Context) (SessionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return "", err
	}
	return s.folded.Status, nil
}

// Snapshot is the session's full state folded from its log: messages, steps,
// tool calls, artifacts, checkpoints. The handle keeps what it folded: each
// call reads only the events appended since the last one. It fails with
// ErrNotFound.
func (s *Session) Snapshot(ctx context.Context) (projection.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return projection.State{}, err
	}
	return s.folded.Clone(), nil
}

// catchUp folds the events appended after the last one folded. Events
// that cannot be folded are skipped, as the read model skips them (the
// summary's Rejected and Fault report them). The caller holds mu.
func (s *Session) catchUp(ctx context.Context) error {
	c, err := s.rt.running()
	if err != nil {
		return err
	}
	from := uint64(0)
	if s.folded.LastSeq > 0 {
		from = s.folded.LastSeq + 1
	}
	for ev, err := range c.Log(ctx, s.id, from) {
		if err != nil {
			return fmt.Errorf("tah: session %s: %w", s.id, err)
		}
		_ = projection.Apply(&s.folded, ev)
	}
	if s.folded.ID == "" {
		return fmt.Errorf("tah: session %s: %w", s.id, ErrNotFound)
	}
	return nil
}

// Run starts a turn with input and waits for it to end. Cancelling ctx cancels
// the turn. The error is for a turn that could not run (unknown session, node
// gone); a turn that failed or was cancelled is a RunResult with that State.
// opts set the turn's own limits (WithBudget) and steps (WithMaxSteps), and
// what the input does when the session is busy (WithSteer, WithInterrupt;
// by default it waits for the turns before it).
func (s *Session) Run(ctx context.Context, input string, opts ...RunOption) (RunResult, error) {
	return s.RunMessage(ctx, llm.User(input), opts...)
}

// RunMessage is Run with a full user message.
func (s *Session) RunMessage(ctx context.Context, msg llm.Message, opts ...RunOption) (RunResult, error) {
	in := wire.Input{Message: &msg}
	if len(opts) > 0 {
		in.Options = &wire.RunOptions{}
		for _, o := range opts {
			o(in.Options)
		}
	}
	return s.follow(ctx, true, func(c *client.Client) (*client.Turn, error) {
		return c.Run(ctx, s.id, in)
	})
}

// Resume continues a turn that a crash interrupted, or one that failed at
// its budget (Code budget_exceeded) once SetBudget raised it. It fails
// with ErrNothingToResume when the session has no unfinished turn, and
// with ErrBudgetExceeded, nothing run, while a limit still stops the turn
// (the error says which).
func (s *Session) Resume(ctx context.Context) (RunResult, error) {
	return s.follow(ctx, false, func(c *client.Client) (*client.Turn, error) {
		return c.Resume(ctx, s.id)
	})
}

// follow starts a turn and waits for its outcome. When ctx ends first and
// cancelOnDone is set, the turn is cancelled.
func (s *Session) follow(ctx context.Context, cancelOnDone bool, start func(*client.Client) (*client.Turn, error)) (RunResult, error) {
	c, err := s.rt.running()
	if err != nil {
		return RunResult{}, err
	}
	t, err := start(c)
	if err != nil {
		return RunResult{}, fmt.Errorf("tah: %w", err)
	}
	defer t.Close()
	o, err := t.Outcome(ctx)
	if ctx.Err() != nil && cancelOnDone {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = t.Cancel(cctx, "the caller's context ended")
		cancel()
	}
	if err != nil {
		return resultOf(o), fmt.Errorf("tah: %w", err)
	}
	return resultOf(o), nil
}

// Approve approves calls that wait for approval and waits for the turn to
// end (or to wait again). A call that awaits no approval fails it with a
// *client.CommandError of code wire.FailureNotPending or
// wire.FailureAlreadyDecided.
func (s *Session) Approve(ctx context.Context, d Decision) (RunResult, error) {
	return s.follow(ctx, false, func(c *client.Client) (*client.Turn, error) {
		return c.Approve(ctx, s.id, d)
	})
}

// Deny denies calls that wait for approval (the model is told "denied by
// the user: <note>") and waits for the turn to end, as Approve does.
func (s *Session) Deny(ctx context.Context, d Decision) (RunResult, error) {
	return s.follow(ctx, false, func(c *client.Client) (*client.Turn, error) {
		return c.Deny(ctx, s.id, d)
	})
}

// Cancel cancels the running turn or compaction; the LLM call and the tools see
// it at once. Cancelling an idle session does nothing.
func (s *Session) Cancel(ctx context.Context) error {
	c, err := s.rt.running()
	if err != nil {
		return err
	}
	if _, err := c.Cancel(ctx, s.id, ""); err != nil {
		return fmt.Errorf("tah: %w", err)
	}
	return nil
}

// Compact summarises every turn so far (specification 0.31). It returns nil when
// there is nothing to compact, and ErrBusy while a turn runs; Cancel aborts it.
func (s *Session) Compact(ctx context.Context) (*CompactResult, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	r, err := c.Compact(ctx, s.id)
	if err != nil {
		return nil, fmt.Errorf("tah: %w", err)
	}
	return r, nil
}

// ChildSummary is a sub-agent's session as its parent lists it; TreeTotals
// what a session and all its sub-agents' sessions used and cost.
type (
	ChildSummary = wire.ChildSummary
	TreeTotals   = wire.TreeTotals
)

// Children are the sessions of the sub-agents this session's calls made
// (AgentOptions.SubAgents), oldest first, and what the whole tree used and
// cost (nil without children), as the read model has them: a child made a
// moment ago may be missing still. A child's own link to its parent is its
// Snapshot's Parent.
func (s *Session) Children(ctx context.Context) ([]ChildSummary, *TreeTotals, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Get(ctx, s.id)
	if err != nil {
		return nil, nil, fmt.Errorf("tah: %w", err)
	}
	return r.Children, r.Tree, nil
}

// SetBudget changes the session's own budget (recorded in budget.set):
// each limit change gives replaces that limit, 0 removing it; a turn limit
// it gives also replaces the current turn's own (WithBudget's), so that a
// raise is not undone by a tighter one the turn was given. It returns once
// the node recorded it. A turn that failed at its budget does not go on by
// itself: Resume runs it on. A change of no limit, or a negative one, fails
// with client.ErrMalformedInput; an unknown session with ErrNotFound.
func (s *Session) SetBudget(ctx context.Context, change BudgetChange) error {
	c, err := s.rt.running()
	if err != nil {
		return err
	}
	if _, err := c.SetBudget(ctx, s.id, change, ""); err != nil {
		return fmt.Errorf("tah: %w", err)
	}
	return nil
}

// Budget is the session's limits in force (for its current or last turn,
// and for the session: the tightest of the node's, its own and the turn's,
// each with where it was set) with what each scope has spent, and the limit
// its last turn reached; nil when it has neither. It is folded from the
// log, as Snapshot is, so that it says what SetBudget just did.
func (s *Session) Budget(ctx context.Context) (*SessionBudget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	return wire.BudgetOf(&s.folded), nil
}

// ReplayOptions say what Replay compares, and how the agent definition it
// compares with differs from the node's. The zero value replays every turn
// under the node's definition.
type ReplayOptions struct {
	// Turn, when not 0, replays only that turn; FromStep, when set, from
	// that step (its id) on.
	Turn     int
	FromStep string
	// SystemPrompt, when set, replaces the system prompt ("" for none);
	// Model, when set, the model; ContextChars, when set, the context
	// budget (0: none); MaxSteps, when set, the most LLM steps of a turn
	// (0: unlimited); Tools, when set, every tool offered, in order.
	SystemPrompt *string
	Model        string
	ContextChars *int
	MaxSteps     *int
	Tools        *[]llm.ToolSchema
}

// ReplayReport is what Replay found: Identical, or the first Divergence
// (its Text says it for a person).
type ReplayReport = replay.Report

// Replay re-runs the session's recorded turns against today's code and
// the node's agent definition, changed as opts says, with no model call
// and no tool run (tah.api.replay): the model's answers and the tool
// results are the log's. At every recorded LLM step the request the
// definition makes is compared with the one recorded; the report says
// whether all are identical, or where and how the first differs. A turn
// the session does not have fails with ErrBadRequest, a step with
// ErrNotFound.
func (s *Session) Replay(ctx context.Context, opts ReplayOptions) (ReplayReport, error) {
	c, err := s.rt.running()
	if err != nil {
		return ReplayReport{}, err
	}
	r, err := c.Replay(ctx, wire.ReplayRequest{Session: s.id, Turn: opts.Turn, FromStep: opts.FromStep, SystemPrompt: opts.SystemPrompt,
		Model: opts.Model, ContextChars: opts.ContextChars, MaxSteps: opts.MaxSteps, Tools: opts.Tools})
	if err != nil {
		return r, fmt.Errorf("tah: replay %s: %w", s.id, err)
	}
	return r, nil
}

// LiveReplay is a replay's live run: the session made at the divergence
// and how its turn ended.
type LiveReplay struct {
	// Session is the live session, labelled wire.LabelReplayOf with the
	// recorded session's id.
	Session *Session
	// Turn is the recorded turn it ran again (with that turn's user
	// message); the recorded turns before it are its history.
	Turn int
	// Result is how its turn ended.
	Result RunResult
}

// ReplayLive replays as Replay does and, when the replay diverges, goes on
// live from the divergence: a new session, forked right after the step
// before the diverging one and run under the replay's definition (the
// node's changed as opts says, whichever node runs it), runs the turn on
// from there with the real model and tools (a divergence at a turn's first
// step runs the turn's message again); ReplayLive waits for the turn to
// end (cancelling ctx cancels it, when it started it). The LiveReplay is nil when the replay
// is identical. opts.Tools may not be set (ErrBadRequest): a live run
// calls the node's tools as they are.
func (s *Session) ReplayLive(ctx context.Context, opts ReplayOptions) (ReplayReport, *LiveReplay, error) {
	c, err := s.rt.running()
	if err != nil {
		return ReplayReport{}, nil, err
	}
	r, err := c.ReplayLive(ctx, wire.ReplayLiveRequest{Session: s.id, Turn: opts.Turn, FromStep: opts.FromStep, SystemPrompt: opts.SystemPrompt,
		Model: opts.Model, ContextChars: opts.ContextChars, MaxSteps: opts.MaxSteps, Tools: opts.Tools})
	if err != nil {
		return r, nil, fmt.Errorf("tah: replay %s live: %w", s.id, err)
	}
	if r.Live == nil {
		return r, nil, nil
	}
	live := &LiveReplay{Session: &Session{id: r.Live.Session, rt: s.rt}, Turn: r.Live.Turn}
	if r.Live.AfterStep != "" {
		live.Result, err = live.Session.Resume(ctx) // its turn is open at the step before the divergence
	} else {
		live.Result, err = live.Session.RunMessage(ctx, r.Live.Message)
	}
	return r, live, err
}

func resultOf(o wire.Outcome) RunResult {
	r := RunResult{Session: o.Session, Turn: o.Turn, State: o.Status, Content: o.Content,
		Error: o.Error, Code: o.Code, Steps: o.Steps, Usage: o.Usage, Cost: o.Cost, AwaitingApproval: o.AwaitingApproval}
	if o.Code == event.CodeBudgetExceeded {
		r.Budget = o.Budget
	}
	return r
}
