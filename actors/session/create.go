package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// ErrExists: a session with this id already has a log.
var ErrExists = errors.New("session already exists")

// Create writes session.created for a new session sid with the configuration
// cfg (specification: SessionService.create). It fails with ErrExists when sid
// already has events: the append is fenced on an empty log.
func Create(ctx context.Context, b *bus.Bus, sid string, cfg Config, labels map[string]string) (event.Event, error) {
	return create(ctx, b, sid, event.SessionCreatedData{Config: cfg.eventConfig(), Labels: labels})
}

// CreateWithBudget is Create of a session with a budget of its own (nil or
// empty: none); the node's (cfg.Budget), when tighter, still wins.
func CreateWithBudget(ctx context.Context, b *bus.Bus, sid string, cfg Config, labels map[string]string, budget *event.Budget) (event.Event, error) {
	if budget != nil && budget.IsZero() {
		budget = nil
	}
	return create(ctx, b, sid, event.SessionCreatedData{Config: cfg.eventConfig(), Labels: labels, Budget: budget})
}

func create(ctx context.Context, b *bus.Bus, sid string, data event.SessionCreatedData, more ...event.Event) (event.Event, error) {
	w, err := b.Writer(sid, 0, 0)
	if err != nil {
		return event.Event{}, err
	}
	ev, err := event.New(sid, event.SessionCreated, data)
	if err != nil {
		return event.Event{}, err
	}
	ev.Time = time.Now()
	evs := append([]event.Event{ev}, more...)
	for i := range evs[1:] {
		evs[i+1].Time = ev.Time
	}
	if _, err := w.Append(ctx, evs...); err != nil {
		if errors.Is(err, bus.ErrFenced) {
			return event.Event{}, fmt.Errorf("session %s: %w", sid, ErrExists)
		}
		return event.Event{}, err
	}
	return evs[0], nil
}

// ForkOptions say where a fork ends and what it changes: the first Turns
// turns (negative: all; 0: only the system message), or, with AtStep, the
// history up to that step (projection.PlanFork); Edit, when set, replaces
// one message of the copy.
type ForkOptions struct {
	Turns  int
	AtStep string
	Edit   *projection.Edit
}

// Forked is what Fork wrote: session.forked, the open turn's number (0:
// the copy ends between turns) and the edit, if any.
type Forked struct {
	Event    event.Event
	OpenTurn int
	Edit     *event.SessionEditedData
}

// Fork creates session newID from the messages of session srcID
// (specification v0.22), as opts says. The source is read from its log and
// left unchanged; the new session's steps and events start empty but for
// session.created, session.forked and, for a fork inside a turn,
// turn.forked (the turn is open: a resume runs it on), and session.edited
// for an edit: all in one record. A source whose log is faulted
// (projection.Fault) gives the messages before its fault: a fork is how
// such a session is repaired. A fork that cannot be made as asked wraps
// projection.ErrBadFork or projection.ErrUnknownStep.
func Fork(ctx context.Context, b *bus.Bus, srcID, newID string, opts ForkOptions, cfg Config) (Forked, error) {
	evs, _, err := b.Replay(ctx, srcID, 1)
	if err != nil && !errors.As(err, new(*projection.Fault)) {
		return Forked{}, fmt.Errorf("fork %s: %w", srcID, err)
	}
	if len(evs) == 0 || evs[0].Type != event.SessionCreated {
		return Forked{}, fmt.Errorf("fork %s: %w", srcID, ErrUnknownSession)
	}
	spec := projection.ForkSpec{Turns: opts.Turns, AtStep: opts.AtStep, SystemPrompt: cfg.SystemPrompt}
	if opts.Edit != nil {
		spec.EditStep = opts.Edit.StepID
	}
	plan, err := projection.PlanFork(evs, spec)
	if err != nil {
		return Forked{}, fmt.Errorf("fork %s: %w", srcID, err)
	}
	turns := opts.Turns
	if opts.AtStep != "" {
		turns = -1 // informative: the copy is the history up to a step
	}
	var more []event.Event
	add := func(t event.Type, payload any) error {
		ev, err := event.New(newID, t, payload)
		more = append(more, ev)
		return err
	}
	if err := add(event.SessionForked, event.SessionForkedData{From: srcID, FromSeq: plan.FromSeq, Turns: turns, Messages: plan.Messages}); err != nil {
		return Forked{}, err
	}
	out := Forked{}
	if plan.Open != nil {
		out.OpenTurn = plan.Open.Turn
		if err := add(event.TurnForked, *plan.Open); err != nil {
			return Forked{}, err
		}
	}
	if opts.Edit != nil {
		d, err := plan.Edit(*opts.Edit)
		if err != nil {
			return Forked{}, fmt.Errorf("fork %s: %w", srcID, err)
		}
		out.Edit = &d
		if err := add(event.SessionEdited, d); err != nil {
			return Forked{}, err
		}
	}
	created, err := create(ctx, b, newID, event.SessionCreatedData{Config: cfg.eventConfig(), ForkedFrom: srcID}, more...)
	if err != nil {
		return Forked{}, err
	}
	out.Event = more[0]
	out.Event.Seq, out.Event.Index = created.Seq, 1 // in session.created's record
	return out, nil
}
