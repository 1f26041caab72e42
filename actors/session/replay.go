package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// A replay's live session (package replay, tahctl replay --live): a fork of
// a recorded session where a replay diverged (right after the step before
// the diverging one, the turn open; or at the start of the diverging
// turn), run on from there by the real model and tools under the
// definition the replay compared with. Its session.created pins that definition (Definition), so
// that whichever node claims it restates it, not its own: a claim restates
// the node's configuration otherwise, and the live run would be today's
// node's agent again, not the one under test.

// withDefinition is c with the definition a session was created with (nil:
// c itself): its system prompt, model, context budget and maxSteps (the
// log's 0 is unlimited).
func withDefinition(c Config, def *event.Config) Config {
	if def == nil {
		return c
	}
	c.SystemPrompt, c.Model, c.ContextChars = def.SystemPrompt, def.Model, def.ContextChars
	c.MaxSteps = def.MaxSteps
	if def.MaxSteps == 0 {
		c.MaxSteps = -1 // Config's unlimited
	}
	return c
}

// DefinitionOf is Definition for a session created with the definition def
// (session.created definition; nil: none), which a replay of it compares
// with in place of the node's.
func DefinitionOf(node Config, catalog []llm.ToolSchema, parent *event.ParentLink, def *event.Config) (event.Config, []llm.ToolSchema) {
	c := withDefinition(configFor(node, parent), def)
	depth := 0
	if parent != nil {
		depth = parent.Depth
	}
	return c.eventConfig(), offeredOf(c, catalog, depth)
}

// ErrNoSuchTurn: ForkLive names a turn the source session has not started.
var ErrNoSuchTurn = errors.New("no such turn")

// LiveFork is what ForkLive made: the new session's session.created, the
// user message that started the source's turn, and how the new session's
// turn goes on.
type LiveFork struct {
	Created event.Event
	Message llm.Message
	// Turns is how many of the source's turns the new session holds whole:
	// those before the turn it runs again.
	Turns int
	// Open is set when the copy ends inside the turn (turn.forked): a
	// resume runs it on from there. Else the caller starts the turn with
	// Message.
	Open bool
}

// ForkLive creates session newID, a replay's live session, from session
// srcID's history up to where a replay diverged in its turn turn: right
// after step afterStep of that turn ended (projection.PlanFork: the turn
// is open, turn.forked, and a resume runs it on from there), or, when
// afterStep is empty (a divergence at the turn's first step) or the copy
// would end between turns, the history before the turn began. Its system
// prompt is def's; it has labels and the source's own budget, and runs on
// every node with definition def (session.created definition). It writes
// nothing else: the caller resumes the open turn, or starts the turn with
// the returned message. It fails with ErrUnknownSession, ErrNoSuchTurn, a
// *projection.Fault for a log that does not fold up to that turn, an
// error of PlanFork, or ErrExists.
func ForkLive(ctx context.Context, b *bus.Bus, srcID, newID string, turn int, afterStep string, def event.Config, labels map[string]string) (LiveFork, error) {
	evs, _, err := b.Replay(ctx, srcID, 1)
	if err != nil && !errors.As(err, new(*projection.Fault)) {
		return LiveFork{}, fmt.Errorf("fork %s: %w", srcID, err)
	}
	src, msg, err := beforeTurn(evs, srcID, turn)
	if err != nil {
		return LiveFork{}, err
	}
	out := LiveFork{Message: msg, Turns: turn - 1}
	more, err := forkEvents(newID, srcID, evs, src, afterStep, def, &out)
	if err != nil {
		return LiveFork{}, err
	}
	pinned := def
	pinned.Budget = nil // the claiming node's stays in force
	created := event.SessionCreatedData{Config: def, ForkedFrom: srcID, Labels: labels, Definition: &pinned}
	if !src.Budget.IsZero() {
		bud := src.Budget
		created.Budget = &bud
	}
	if out.Created, err = create(ctx, b, newID, created, more...); err != nil {
		return LiveFork{}, err
	}
	return out, nil
}

// beforeTurn is session srcID (of log evs) folded up to its turn turn's
// start, and that turn's user message.
func beforeTurn(evs []event.Event, srcID string, turn int) (projection.State, llm.Message, error) {
	var src projection.State
	for _, e := range evs {
		if e.Type == event.TurnStarted {
			if d, err := event.DecodeAs[event.TurnStartedData](e); err == nil && d.Turn == turn {
				if src.ID == "" {
					break
				}
				return src, d.Message.Clone(), nil
			}
		}
		if err := projection.ApplyLog(&src, e); err != nil {
			return src, llm.Message{}, fmt.Errorf("fork %s before turn %d: %w", srcID, turn, err)
		}
	}
	if src.ID == "" {
		return src, llm.Message{}, fmt.Errorf("fork %s: %w", srcID, ErrUnknownSession)
	}
	return src, llm.Message{}, fmt.Errorf("fork %s: session %s has no turn %d: %w", srcID, srcID, turn, ErrNoSuchTurn)
}

// forkEvents are the events after session.created of a live fork: the
// copy up to afterStep, the turn open (out.Open), or the history src
// holds before the turn.
func forkEvents(newID, srcID string, evs []event.Event, src projection.State, afterStep string, def event.Config, out *LiveFork) ([]event.Event, error) {
	if afterStep != "" {
		plan, err := projection.PlanFork(evs, projection.ForkSpec{AtStep: afterStep, SystemPrompt: def.SystemPrompt})
		if err != nil {
			return nil, fmt.Errorf("fork %s after step %s: %w", srcID, afterStep, err)
		}
		if plan.Open != nil {
			forked, err := event.New(newID, event.SessionForked, event.SessionForkedData{From: srcID, FromSeq: plan.FromSeq, Turns: out.Turns, Messages: plan.Messages})
			if err != nil {
				return nil, err
			}
			open, err := event.New(newID, event.TurnForked, *plan.Open)
			out.Open = true
			return []event.Event{forked, open}, err
		}
		// The copy ends between turns (the step answered the turn, and
		// the recording went on after a steer): the turn runs again whole.
	}
	msgs := projection.ReplaceSystemPrompt(projection.Repair(llm.CloneMessages(src.Messages)), def.SystemPrompt)
	forked, err := event.New(newID, event.SessionForked, event.SessionForkedData{From: srcID, FromSeq: src.LastSeq, Turns: out.Turns, Messages: msgs})
	return []event.Event{forked}, err
}
