package tah

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
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
}

// CompactResult is what Compact returns: the turns summarised and the summary's size.
type CompactResult = wire.CompactResult

// SessionSummary is one row of List.
type SessionSummary = wire.SessionSummary

// SessionService is the specification's SessionService.
type SessionService struct{ rt *Runtime }

// Create makes a new session (session.created).
func (ss *SessionService) Create(ctx context.Context) (*Session, error) {
	n, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	sid := event.NewSessionID()
	if _, err := session.Create(ctx, n.Bus, sid, ss.rt.sessionCfg, nil); err != nil {
		return nil, fmt.Errorf("tah: create: %w", err)
	}
	return &Session{id: sid, rt: ss.rt}, nil
}

// Get returns the session with this id, from the read model or, when the read
// model has not seen it yet, from the log. It fails with ErrNotFound.
func (ss *SessionService) Get(ctx context.Context, id string) (*Session, error) {
	n, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	if err := event.ValidSessionID(id); err != nil {
		return nil, fmt.Errorf("tah: get: %w", err)
	}
	if _, err := n.Store.GetSession(ctx, id); err == nil {
		return &Session{id: id, rt: ss.rt}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("tah: get %s: %w", id, err)
	}
	evs, _, err := n.Bus.Replay(ctx, id, 1)
	if err != nil {
		return nil, fmt.Errorf("tah: get %s: %w", id, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("tah: session %s: %w", id, ErrNotFound)
	}
	return &Session{id: id, rt: ss.rt}, nil
}

// List returns the sessions, newest first (the first page of at most 100; see
// ListPage for more).
func (ss *SessionService) List(ctx context.Context) ([]SessionSummary, error) {
	p, err := ss.ListPage(ctx, store.ListOptions{Limit: 100})
	return p.Sessions, err
}

// ListPage returns one page of sessions, newest first.
func (ss *SessionService) ListPage(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	n, err := ss.rt.running()
	if err != nil {
		return store.Page{}, err
	}
	return n.Store.ListSessions(ctx, opts)
}

// ForkOptions: Turns keeps the first N turns (0: only the system message);
// nil keeps them all.
type ForkOptions struct {
	Turns *int
}

// Fork copies the messages of session id into a new session (specification
// v0.22); the source is unchanged.
func (ss *SessionService) Fork(ctx context.Context, id string, opts ForkOptions) (*Session, error) {
	n, err := ss.rt.running()
	if err != nil {
		return nil, err
	}
	turns := -1
	if opts.Turns != nil {
		if *opts.Turns < 0 {
			return nil, errors.New("tah: fork: turns is negative")
		}
		turns = *opts.Turns
	}
	sid := event.NewSessionID()
	if _, err := session.Fork(ctx, n.Bus, id, sid, turns, ss.rt.sessionCfg); err != nil {
		if errors.Is(err, session.ErrUnknownSession) {
			return nil, fmt.Errorf("tah: fork %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("tah: fork %s: %w", id, err)
	}
	return &Session{id: sid, rt: ss.rt}, nil
}

// Session is the specification's Session: a handle on one durable session.
// Its methods go through the log, so they work whichever node owns it.
type Session struct {
	id string
	rt *Runtime
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// State is the session's current state, folded from its log.
func (s *Session) State(ctx context.Context) (SessionState, error) {
	st, err := s.Snapshot(ctx)
	return st.Status, err
}

// Snapshot is the session's full state folded from its log: messages, steps,
// tool calls, artifacts, checkpoints.
func (s *Session) Snapshot(ctx context.Context) (projection.State, error) {
	n, err := s.rt.running()
	if err != nil {
		return projection.State{}, err
	}
	evs, _, err := n.Bus.Replay(ctx, s.id, 1)
	if err != nil {
		return projection.State{}, err
	}
	st, _ := projection.Fold(evs)
	if st.ID == "" {
		return st, fmt.Errorf("tah: session %s: %w", s.id, ErrNotFound)
	}
	return st, nil
}

// Run starts a turn with input and waits for it to end. Cancelling ctx cancels
// the turn. The error is for a turn that could not run (unknown session, node
// gone); a turn that failed or was cancelled is a RunResult with that State.
func (s *Session) Run(ctx context.Context, input string) (RunResult, error) {
	return s.RunMessage(ctx, llm.User(input))
}

// RunMessage is Run with a full user message.
func (s *Session) RunMessage(ctx context.Context, msg llm.Message) (RunResult, error) {
	m := msg
	o, err := s.command(ctx, wire.Input{Command: wire.CommandRun, Message: &m}, true)
	return resultOf(o), err
}

// Resume continues a turn that a crash interrupted. It fails with
// ErrNothingToResume when the session has no unfinished turn.
func (s *Session) Resume(ctx context.Context) (RunResult, error) {
	o, err := s.command(ctx, wire.Input{Command: wire.CommandResume}, true)
	return resultOf(o), err
}

// Cancel cancels the running turn or compaction; the LLM call and the tools see
// it at once. Cancelling an idle session does nothing.
func (s *Session) Cancel(ctx context.Context) error {
	_, err := s.command(ctx, wire.Input{Command: wire.CommandCancel}, false)
	return err
}

// Compact summarises every turn so far (specification 0.31). It returns nil when
// there is nothing to compact, and ErrBusy while a turn runs; Cancel aborts it.
func (s *Session) Compact(ctx context.Context) (*CompactResult, error) {
	o, err := s.command(ctx, wire.Input{Command: wire.CommandCompact}, true)
	if err != nil {
		return nil, err
	}
	return o.Compact, nil
}

// command publishes in to the session's input subject and waits for its outcome
// on a reply subject of its own. When ctx ends first, a run is cancelled.
func (s *Session) command(ctx context.Context, in wire.Input, cancelOnDone bool) (session.Outcome, error) {
	n, err := s.rt.running()
	if err != nil {
		return session.Outcome{}, err
	}
	nc := n.Bus.Conn()
	in.ReplyTo = nc.NewRespInbox()
	ch := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(in.ReplyTo, ch)
	if err != nil {
		return session.Outcome{}, fmt.Errorf("tah: %s %s: %w", in.Command, s.id, err)
	}
	defer sub.Unsubscribe()
	errs, err := n.Bus.SubscribeErrors(ctx, s.id, func(ie wire.InputError) {
		body, _ := json.Marshal(wire.Outcome{Session: s.id, Failure: ie.Error, FailureCode: ie.Code})
		select {
		case ch <- &nats.Msg{Data: body}:
		default:
		}
	})
	if err != nil {
		return session.Outcome{}, err
	}
	defer errs.Stop()
	if _, err := n.Bus.PublishInput(ctx, s.id, in); err != nil {
		return session.Outcome{}, fmt.Errorf("tah: %s %s: %w", in.Command, s.id, err)
	}
	select {
	case m := <-ch:
		var o wire.Outcome
		if err := json.Unmarshal(m.Data, &o); err != nil {
			return session.Outcome{}, fmt.Errorf("tah: %s %s: malformed outcome: %w", in.Command, s.id, err)
		}
		return session.Outcome{Outcome: o}, outcomeError(s.id, in.Command, o)
	case <-ctx.Done():
		if cancelOnDone && in.Command == wire.CommandRun {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = n.Bus.PublishInput(cctx, s.id, wire.Input{Command: wire.CommandCancel, Reason: "the caller's context ended"})
			cancel()
		}
		return session.Outcome{}, ctx.Err()
	}
}

func resultOf(o session.Outcome) RunResult {
	return RunResult{Session: o.Session, Turn: o.Turn, State: o.Status, Content: o.Content,
		Error: o.Error, Code: o.Code, Steps: o.Steps, Usage: o.Usage}
}

// outcomeError is the Go error of a command's failure, wrapping the sentinel of
// its code.
func outcomeError(sid string, cmd wire.Command, o wire.Outcome) error {
	if o.Failure == "" {
		return nil
	}
	var sentinel error
	switch o.FailureCode {
	case wire.FailureUnknownSession:
		sentinel = ErrNotFound
	case wire.FailureBusy:
		sentinel = ErrBusy
	case wire.FailureNothingToResume:
		sentinel = ErrNothingToResume
	}
	return &commandError{msg: fmt.Sprintf("tah: %s %s: %s", cmd, sid, o.Failure), sentinel: sentinel}
}

// commandError is a command's failure as the owner described it; it unwraps to
// the sentinel of its code (nil when the code has none).
type commandError struct {
	msg      string
	sentinel error
}

func (e *commandError) Error() string { return e.msg }
func (e *commandError) Unwrap() error { return e.sentinel }
