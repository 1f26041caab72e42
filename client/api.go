package client

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/wire"
)

// The API (docs/protocol.md, "The API"): one method per endpoint of
// wire.Endpoints(). Each fails with an *APIError for an error reply (which
// unwraps to ErrNotFound, ErrBadRequest, ErrConflict or ErrTooLarge), with
// ErrNoNode when no node serves the API, and with ErrUnavailable when none
// answered in time. A session id that is not one fails before anything is
// sent, wrapping event.ErrInvalidSessionID.

// Create makes a session (req.Session, or a fresh id) and returns its id.
func (c *Client) Create(ctx context.Context, req wire.CreateRequest) (wire.CreateReply, error) {
	if req.Session != "" {
		if err := validSession(req.Session); err != nil {
			return wire.CreateReply{}, err
		}
	}
	return request[wire.CreateReply](ctx, c, wire.EndpointCreate, req)
}

// Get returns session sid's summary.
func (c *Client) Get(ctx context.Context, sid string) (wire.SessionSummary, error) {
	if err := validSession(sid); err != nil {
		return wire.SessionSummary{}, err
	}
	return request[wire.SessionSummary](ctx, c, wire.EndpointGet, wire.SessionRequest{Session: sid})
}

// List returns a page of sessions, newest first.
func (c *Client) List(ctx context.Context, req wire.ListRequest) (wire.ListReply, error) {
	return request[wire.ListReply](ctx, c, wire.EndpointList, req)
}

// Fork copies the messages of req.Session (its first *req.Turns turns, or
// its history up to step req.AtStep, with req.Edit's change) into a new
// session. A node too old to know at_step or edit ignores them: the fork
// it made is then named in the error, which says so.
func (c *Client) Fork(ctx context.Context, req wire.ForkRequest) (wire.ForkReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.ForkReply{}, err
	}
	if req.Edit != nil {
		if err := req.Edit.Validate(); err != nil {
			return wire.ForkReply{}, fmt.Errorf("fork %s: %w", req.Session, err)
		}
	}
	r, err := request[wire.ForkReply](ctx, c, wire.EndpointFork, req)
	if err == nil && (req.AtStep != "" && r.AtStep == "" || req.Edit != nil && r.Edit == nil) {
		return r, fmt.Errorf("fork %s: the node that answered is older and ignored at_step and edit: session %s is a copy of the whole history, unedited; upgrade the node", req.Session, r.Session)
	}
	return r, err
}

// Messages returns session sid's full history, summaries included.
func (c *Client) Messages(ctx context.Context, sid string) (wire.MessagesReply, error) {
	if err := validSession(sid); err != nil {
		return wire.MessagesReply{}, err
	}
	return request[wire.MessagesReply](ctx, c, wire.EndpointMessages, wire.SessionRequest{Session: sid})
}

// Steps returns a session's steps.
func (c *Client) Steps(ctx context.Context, req wire.StepsRequest) (wire.StepsReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.StepsReply{}, err
	}
	return request[wire.StepsReply](ctx, c, wire.EndpointSteps, req)
}

// Events returns one page of a session's events (Log reads them all).
func (c *Client) Events(ctx context.Context, req wire.EventsRequest) (wire.EventsReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.EventsReply{}, err
	}
	return request[wire.EventsReply](ctx, c, wire.EndpointEvents, req)
}

// StepRequest returns the request that LLM step stepID of session sid sent to
// the model, rebuilt from the session's log, with its recorded hash and
// whether the rebuild matched it. A step the session does not have is
// ErrNotFound; a tool or thinking step, ErrBadRequest.
func (c *Client) StepRequest(ctx context.Context, sid, stepID string) (wire.RequestReply, error) {
	if err := validSession(sid); err != nil {
		return wire.RequestReply{}, err
	}
	return request[wire.RequestReply](ctx, c, wire.EndpointRequest, wire.StepRef{Session: sid, StepID: stepID})
}

// Replay replays session req.Session's recorded turns against the
// answering node's agent definition, changed as req says (docs/protocol.md,
// tah.api.replay): no model is asked and no tool runs. The report says
// whether the replay is identical or where it first diverges. A turn the
// session does not have is ErrBadRequest; a step it does not have,
// ErrNotFound.
func (c *Client) Replay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.ReplayReply{}, err
	}
	return request[wire.ReplayReply](ctx, c, wire.EndpointReplay, req)
}

// ReplayLive replays as Replay does and, when the replay diverges, makes a
// live session at the divergence (tah.api.replay_live): a fork of the
// session at the start of the diverging turn, labelled as its replay,
// that runs under the replay's definition. The report's Live names it and
// carries the turn's user message, for the caller to Run it there; nil
// when the replay is identical. A request with Tools is ErrBadRequest (a
// live run calls the node's tools as they are).
func (c *Client) ReplayLive(ctx context.Context, req wire.ReplayLiveRequest) (wire.ReplayReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.ReplayReply{}, err
	}
	return request[wire.ReplayReply](ctx, c, wire.EndpointReplayLive, req)
}

// Command asks the API to publish command cmd (compact, resume or cancel)
// to req.Session's input, and returns the input's id at once; the outcome
// goes to req.ReplyTo. (Compact, Cancel and Resume publish the input
// themselves and wait for its outcome.)
func (c *Client) Command(ctx context.Context, cmd wire.Command, req wire.CommandRequest) (wire.CommandReply, error) {
	endpoint, ok := commandEndpoints[cmd]
	if !ok {
		return wire.CommandReply{}, fmt.Errorf("the API has no endpoint for command %q (compact, resume, cancel, approve, deny, budget): %w", cmd, ErrBadRequest)
	}
	if err := validSession(req.Session); err != nil {
		return wire.CommandReply{}, err
	}
	return request[wire.CommandReply](ctx, c, endpoint, req)
}

var commandEndpoints = map[wire.Command]string{
	wire.CommandCompact: wire.EndpointCompact, wire.CommandResume: wire.EndpointResume, wire.CommandCancel: wire.EndpointCancel,
	wire.CommandApprove: wire.EndpointApprove, wire.CommandDeny: wire.EndpointDeny, wire.CommandBudget: wire.EndpointBudget,
}

// Tools lists the tools the answering node offers to the model: for a
// Client of a tenant's credential, those its tenant's sessions are
// offered (every tenant's and the tenant's own).
func (c *Client) Tools(ctx context.Context) (wire.ToolsReply, error) {
	return request[wire.ToolsReply](ctx, c, wire.EndpointTools, wire.ToolsRequest{})
}

// ToolsOf lists the tools a session of tenant is offered: every tenant's and
// the tenant's own (an all-tenant credential's view of one tenant).
func (c *Client) ToolsOf(ctx context.Context, tenant string) (wire.ToolsReply, error) {
	return request[wire.ToolsReply](ctx, c, wire.EndpointTools, wire.ToolsRequest{Tenant: tenant})
}

// Status returns the answering node's status and every live node of the
// cluster.
func (c *Client) Status(ctx context.Context) (wire.StatusReply, error) {
	return request[wire.StatusReply](ctx, c, wire.EndpointStatus, wire.EmptyRequest{})
}

// validSession refuses what cannot be a session id before it reaches a
// subject.
func validSession(sid string) error {
	if err := wire.ValidSessionID(sid); err != nil {
		return fmt.Errorf("session %q: %w", sid, err)
	}
	return nil
}
