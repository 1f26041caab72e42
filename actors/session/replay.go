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
// a recorded session at the start of the turn where a replay diverged, run
// from there by the real model and tools under the definition the replay
// compared with. Its session.created pins that definition (Definition), so
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

// LiveFork is what ForkLive made: the new session's session.created and
// the user message that started the source's turn, for the new session's
// first turn.
type LiveFork struct {
	Created event.Event
	Message llm.Message
	// Turns is how many of the source's turns the new session holds: those
	// before the turn it runs again.
	Turns int
}

// ForkLive creates session newID from session srcID's history before its
// turn turn started (its messages up to that turn.started, system prompt
// replaced by def's), with labels and the source's own budget, running on
// every node with definition def (session.created definition). It writes
// nothing else: the caller starts the new session's turn with the returned
// message. A fork mid-turn is not made: the fork machinery copies whole
// turns (session.forked holds a history with no turn open), so the live
// run starts over at the diverging turn's first step. It fails with
// ErrUnknownSession, ErrNoSuchTurn, a *projection.Fault for a log that
// does not fold up to that turn, or ErrExists.
func ForkLive(ctx context.Context, b *bus.Bus, srcID, newID string, turn int, def event.Config, labels map[string]string) (LiveFork, error) {
	evs, _, err := b.Replay(ctx, srcID, 1)
	if err != nil && !errors.As(err, new(*projection.Fault)) {
		return LiveFork{}, fmt.Errorf("fork %s: %w", srcID, err)
	}
	var src projection.State
	var msg *llm.Message
	for _, e := range evs {
		if e.Type == event.TurnStarted {
			if d, err := event.DecodeAs[event.TurnStartedData](e); err == nil && d.Turn == turn {
				msg = &d.Message
				break
			}
		}
		if err := projection.ApplyLog(&src, e); err != nil {
			return LiveFork{}, fmt.Errorf("fork %s before turn %d: %w", srcID, turn, err)
		}
	}
	switch {
	case src.ID == "":
		return LiveFork{}, fmt.Errorf("fork %s: %w", srcID, ErrUnknownSession)
	case msg == nil:
		return LiveFork{}, fmt.Errorf("fork %s: session %s has no turn %d: %w", srcID, srcID, turn, ErrNoSuchTurn)
	}
	msgs := projection.ReplaceSystemPrompt(projection.Repair(llm.CloneMessages(src.Messages)), def.SystemPrompt)
	forked, err := event.New(newID, event.SessionForked, event.SessionForkedData{From: srcID, FromSeq: src.LastSeq, Turns: turn - 1, Messages: msgs})
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
	ev, err := create(ctx, b, newID, created, forked)
	if err != nil {
		return LiveFork{}, err
	}
	return LiveFork{Created: ev, Message: msg.Clone(), Turns: turn - 1}, nil
}
