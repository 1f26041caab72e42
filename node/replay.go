package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

// apiReplay replays a session's log against this node's definition of it,
// with the request's changes (package replay): it reads the log and asks
// no model and no tool, so that any node answers it, a worker too.
func (n *Node) apiReplay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayReply, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.ReplayReply{}, err
	}
	if err := req.Validate(); err != nil {
		return wire.ReplayReply{}, badRequest("%v", err)
	}
	evs, _, err := n.bus.Replay(ctx, req.Session, 1)
	if err != nil {
		return wire.ReplayReply{}, err
	}
	def := n.replayDefinition(ctx, parentOf(evs), req)
	r, err := replay.Run(evs, def, replay.Options{Turn: req.Turn, FromStep: req.FromStep})
	switch {
	case errors.Is(err, replay.ErrNoTurn):
		return r, badRequest("%v: give a turn of the session (tahctl show %s lists them), or none for every turn", err, req.Session)
	case errors.Is(err, replay.ErrUnknownStep):
		return r, &apiError{wire.APIErrNotFound, fmt.Errorf("%w (tahctl show --json %s lists its steps)", err, req.Session)}
	case err != nil:
		return r, fmt.Errorf("session %s: %w", req.Session, err)
	}
	return r, nil
}

// replayDefinition is the definition a replay of the session whose parent
// link is parent compares with: this node's (session.Definition, with its
// tools as the model is offered them now; a sub-agent's child's is its
// sub-agent's), changed as req says.
func (n *Node) replayDefinition(ctx context.Context, parent *event.ParentLink, req wire.ReplayRequest) replay.Definition {
	var catalog []llm.ToolSchema
	if req.Tools == nil {
		if n.remote != nil {
			// As tah.api.tools: a tool service that started a moment ago
			// counts.
			if err := n.remote.Refresh(ctx); err != nil {
				n.log.Debug("remote tools not refreshed", "err", err)
			}
		}
		catalog = n.ToolSchemas()
	}
	// The changes apply to the session's definition, after a child's is
	// made of its sub-agent's.
	ec, tools := session.Definition(n.opts.Session, catalog, parent)
	if req.SystemPrompt != nil {
		ec.SystemPrompt = *req.SystemPrompt
	}
	if req.Model != "" {
		ec.Model = req.Model
	}
	if req.ContextChars != nil {
		ec.ContextChars = *req.ContextChars
	}
	if req.MaxSteps != nil {
		ec.MaxSteps = *req.MaxSteps // the log's: 0 is unlimited
	}
	if req.Tools != nil {
		tools = *req.Tools
	}
	return replay.Definition{Config: ec, Tools: tools}
}

// parentOf is the parent link of the session whose log is evs (nil: not a
// sub-agent's child), from its session.created.
func parentOf(evs []event.Event) *event.ParentLink {
	for _, e := range evs {
		if e.Type == event.SessionCreated {
			d, err := event.DecodeAs[event.SessionCreatedData](e)
			if err != nil {
				return nil // the replay says what is wrong with it
			}
			return d.Parent
		}
	}
	return nil
}
