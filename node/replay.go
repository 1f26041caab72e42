package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

// apiReplay replays a session's log against this node's definition of it,
// with the request's changes (package replay): it reads the log and asks
// no model and no tool, so that any node answers it, a worker too.
func (n *Node) apiReplay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayReply, error) {
	r, _, _, err := n.replay(ctx, req)
	return r, err
}

// replay is the report of a replay of req.Session, the definition it
// compared with, and the log it replayed.
func (n *Node) replay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayReply, replay.Definition, []event.Event, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.ReplayReply{}, replay.Definition{}, nil, err
	}
	if err := req.Validate(); err != nil {
		return wire.ReplayReply{}, replay.Definition{}, nil, badRequest("%v", err)
	}
	evs, _, err := n.bus.Replay(ctx, req.Session, 1)
	if err != nil {
		return wire.ReplayReply{}, replay.Definition{}, nil, err
	}
	created := createdOf(evs)
	def := n.replayDefinition(ctx, created.Parent, created.Definition, req)
	r, err := replay.Run(evs, def, replay.Options{Turn: req.Turn, FromStep: req.FromStep})
	switch {
	case errors.Is(err, replay.ErrNoTurn):
		return r, def, evs, badRequest("%v: give a turn of the session (tahctl show %s lists them), or none for every turn", err, req.Session)
	case errors.Is(err, replay.ErrUnknownStep):
		return r, def, evs, &apiError{wire.APIErrNotFound, fmt.Errorf("%w (tahctl show --json %s lists its steps)", err, req.Session)}
	case err != nil:
		return r, def, evs, fmt.Errorf("session %s: %w", req.Session, err)
	}
	return r, def, evs, nil
}

// apiReplayLive replays as apiReplay does and, at a divergence, forks the
// session where it diverged into a live session that runs under the
// replay's definition (session.ForkLive), labelled as a replay of it:
// right after the step before the diverging one, the turn open (the caller
// resumes it), or, at a turn's first step, before the turn (the caller
// sends the turn's message).
func (n *Node) apiReplayLive(ctx context.Context, req wire.ReplayLiveRequest) (wire.ReplayReply, error) {
	if req.Tools != nil {
		return wire.ReplayReply{}, badRequest("tools: a live run calls this node's tools as they are, and cannot offer them with other schemas; replay without tools to run live, or without live to compare them")
	}
	r, def, evs, err := n.replay(ctx, req)
	if err != nil || r.Divergence == nil {
		return r, err
	}
	d := r.Divergence
	if d.Turn < 1 {
		return r, badRequest("session %s diverges before its first turn (%s): there is no turn to run live", req.Session, d.Summary)
	}
	sid := event.InTenant(event.TenantOf(req.Session), event.NewSessionID())
	after := stepBefore(evs, *d)
	made, err := n.countSession(ctx, sid)
	if err != nil {
		return r, err
	}
	lf, err := session.ForkLive(ctx, n.bus, req.Session, sid, d.Turn, after, def.Config, map[string]string{wire.LabelReplayOf: req.Session})
	if made(err) != nil {
		return r, fmt.Errorf("live session of %s at turn %d: %w", req.Session, d.Turn, err)
	}
	r.Live = &replay.Live{Session: sid, Turn: d.Turn, Turns: lf.Turns, Message: lf.Message}
	if lf.Open {
		r.Live.AfterStep = after
	}
	return r, nil
}

// stepBefore is the step of d's turn that ended last before the event
// where the replay diverged (an LLM step's start, or the end of the turn
// at max_steps), for a live fork right after it; "" when the divergence is
// at the turn's first LLM step (its compaction included), or when that
// step is a compaction's (a fork cannot end there).
func stepBefore(evs []event.Event, d replay.Divergence) string {
	if d.Step <= 1 {
		return ""
	}
	var st projection.State
	last := ""
	for _, e := range evs {
		if e.Seq > d.Seq || e.Seq == d.Seq && (e.Type == event.LLMStarted || e.Type == event.AgentFailed) {
			break
		}
		if projection.ApplyLog(&st, e) != nil {
			return ""
		}
		var named struct {
			StepID string `json:"step_id"`
		}
		if json.Unmarshal(e.Data, &named) != nil || named.StepID == "" {
			continue
		}
		if s := st.Step(named.StepID); s != nil && s.Turn == d.Turn && s.Status.Done() {
			last = named.StepID
			if s.Compaction {
				last = ""
			}
		}
	}
	return last
}

// replayDefinition is the definition a replay of the session whose parent
// link is parent compares with: this node's (session.Definition, with its
// tools as the model is offered them now; a sub-agent's child's is its
// sub-agent's; a session created with a definition of its own, a replay's
// live session, has that one), changed as req says.
func (n *Node) replayDefinition(ctx context.Context, parent *event.ParentLink, pinned *event.Config, req wire.ReplayRequest) replay.Definition {
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
	ec, tools := session.DefinitionOf(n.opts.Session, catalog, parent, pinned)
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

// createdOf is the session.created of the session whose log is evs (zero:
// none, or one that does not decode: the replay says what is wrong).
func createdOf(evs []event.Event) event.SessionCreatedData {
	for _, e := range evs {
		if e.Type == event.SessionCreated {
			d, _ := event.DecodeAs[event.SessionCreatedData](e)
			return d
		}
	}
	return event.SessionCreatedData{}
}
