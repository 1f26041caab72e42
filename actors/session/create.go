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

// Fork creates session newID from the messages of session srcID
// (specification v0.22): the first turns turns (negative: all; 0: only the
// system message). The source is read from its log and left unchanged; the new
// session's steps and events start empty but for session.created and
// session.forked. A source whose log is faulted (projection.Fault) gives the
// messages before its fault: a fork is how such a session is repaired.
func Fork(ctx context.Context, b *bus.Bus, srcID, newID string, turns int, cfg Config) (event.Event, error) {
	evs, _, err := b.Replay(ctx, srcID, 1)
	if err != nil && !errors.As(err, new(*projection.Fault)) {
		return event.Event{}, fmt.Errorf("fork %s: %w", srcID, err)
	}
	var src projection.State
	projection.FoldLog(&src, evs)
	last := src.LastSeq
	if src.ID == "" {
		return event.Event{}, fmt.Errorf("fork %s: %w", srcID, ErrUnknownSession)
	}
	msgs := projection.ReplaceSystemPrompt(projection.ForkMessages(src.Messages, turns), cfg.SystemPrompt)
	forked, err := event.New(newID, event.SessionForked, event.SessionForkedData{From: srcID, FromSeq: last, Turns: turns, Messages: msgs})
	if err != nil {
		return event.Event{}, err
	}
	return create(ctx, b, newID, event.SessionCreatedData{Config: cfg.eventConfig(), ForkedFrom: srcID}, forked)
}
