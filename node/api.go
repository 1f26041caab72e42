package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
)

// APIVersion is the version of the request/reply API (docs/protocol.md).
const APIVersion = "1.0.0"

// API error codes, in the Nats-Service-Error-Code header.
const (
	APIBadRequest = "400" // the request is not valid JSON or lacks a field
	APINotFound   = "404" // no such session
	APIConflict   = "409" // the session exists already
	APIInternal   = "500" // anything else
)

// apiRequest is the body every endpoint accepts; each reads the fields it needs.
type apiRequest struct {
	Session string            `json:"session,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Turns   *int              `json:"turns,omitempty"`
	Status  string            `json:"status,omitempty"`
	Limit   int               `json:"limit,omitempty"`
	Offset  int               `json:"offset,omitempty"`
	Before  string            `json:"before,omitempty"`
	FromSeq uint64            `json:"from_seq,omitempty"`
	// ReplyTo is where the outcome of compact, resume or cancel is published.
	ReplyTo string `json:"reply_to,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// StartAPI serves the request/reply API as the NATS micro service "tah" with
// endpoints under tah.api. (create, get, list, fork, messages, steps, events,
// compact, cancel, resume, tools, status).
func (n *Node) StartAPI(ctx context.Context) error {
	svc, err := micro.AddService(n.Bus.Conn(), micro.Config{
		Name: "tah", Version: APIVersion, QueueGroup: "tah-api",
		Description: "TAH durable agent sessions: the request/reply API (docs/protocol.md)",
	})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	g := svc.AddGroup("tah.api")
	for name, h := range map[string]func(context.Context, apiRequest) (any, error){
		"create": n.apiCreate, "get": n.apiGet, "list": n.apiList, "fork": n.apiFork,
		"messages": n.apiMessages, "steps": n.apiSteps, "events": n.apiEvents,
		"compact": n.apiCommand(bus.CommandCompact), "resume": n.apiCommand(bus.CommandResume),
		"cancel": n.apiCommand(bus.CommandCancel), "tools": n.apiTools, "status": n.apiStatus,
	} {
		if err := g.AddEndpoint(name, n.apiHandler(name, h)); err != nil {
			svc.Stop()
			return fmt.Errorf("api endpoint %s: %w", name, err)
		}
	}
	n.closers = append(n.closers, func(context.Context) error { return svc.Stop() })
	return nil
}

type apiError struct {
	code string
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{APIBadRequest, fmt.Errorf(format, args...)}
}

func (n *Node) apiHandler(name string, h func(context.Context, apiRequest) (any, error)) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		var req apiRequest
		if data := r.Data(); len(data) > 0 {
			if err := json.Unmarshal(data, &req); err != nil {
				r.Error(APIBadRequest, "the request is not the JSON object of tah.api."+name+": "+err.Error(), nil)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := h(ctx, req)
		if err != nil {
			code := APIInternal
			var ae *apiError
			switch {
			case errors.As(err, &ae):
				code = ae.code
			case errors.Is(err, store.ErrNotFound), errors.Is(err, session.ErrUnknownSession):
				code = APINotFound
			case errors.Is(err, event.ErrInvalidSessionID), errors.Is(err, bus.ErrMalformedInput), errors.Is(err, store.ErrInvalidCursor):
				code = APIBadRequest
			case errors.Is(err, session.ErrExists):
				code = APIConflict
			}
			r.Error(code, err.Error(), nil)
			return
		}
		if err := r.RespondJSON(res); err != nil {
			n.log.Warn("api reply not sent", "endpoint", name, "err", err)
		}
	})
}

func (n *Node) needSession(ctx context.Context, id string) error {
	if id == "" {
		return badRequest("no session given: set \"session\" to a session id (tahctl list shows them)")
	}
	if err := event.ValidSessionID(id); err != nil {
		return err
	}
	if _, err := n.Store.GetSession(ctx, id); err == nil {
		return nil
	}
	// Not in the read model (yet): the log decides.
	evs, _, err := n.Bus.Replay(ctx, id, 1)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return &apiError{APINotFound, fmt.Errorf("session %s not found (tahctl list shows the sessions)", id)}
	}
	return nil
}

func (n *Node) apiCreate(ctx context.Context, req apiRequest) (any, error) {
	sid := req.Session
	if sid == "" {
		sid = event.NewSessionID()
	}
	ev, err := session.Create(ctx, n.Bus, sid, n.opts.Session, req.Labels)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": sid, "seq": ev.Seq}, nil
}

// sessionView is what get returns: the read model's row, or the log's fold
// while the read model has not caught up.
func (n *Node) apiGet(ctx context.Context, req apiRequest) (any, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return nil, err
	}
	row, err := n.Store.GetSession(ctx, req.Session)
	if err == nil {
		return row, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err := n.Projector.WaitFor(ctx, n.lastSeq(ctx, req.Session)); err != nil {
		return nil, err
	}
	return n.Store.GetSession(ctx, req.Session)
}

func (n *Node) lastSeq(ctx context.Context, sid string) uint64 {
	evs, last, err := n.Bus.Replay(ctx, sid, 1)
	if err != nil || len(evs) == 0 {
		return 0
	}
	return last
}

func (n *Node) apiList(ctx context.Context, req apiRequest) (any, error) {
	limit := req.Limit
	if limit <= 0 || limit > 1000 {
		limit = 50
	}
	return n.Store.ListSessions(ctx, store.ListOptions{Status: projection.Status(req.Status), Limit: limit, Offset: req.Offset, Before: req.Before})
}

func (n *Node) apiFork(ctx context.Context, req apiRequest) (any, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return nil, err
	}
	turns := -1
	if req.Turns != nil {
		if *req.Turns < 0 {
			return nil, badRequest("turns is negative: give the number of turns to keep, 0 for only the system message")
		}
		turns = *req.Turns
	}
	sid := event.NewSessionID()
	ev, err := session.Fork(ctx, n.Bus, req.Session, sid, turns, n.opts.Session)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": sid, "forked_from": req.Session, "seq": ev.Seq}, nil
}

// readModel answers from the read model once it has caught up with the log.
func (n *Node) readModel(ctx context.Context, sid string) error {
	if err := n.needSession(ctx, sid); err != nil {
		return err
	}
	return n.Projector.WaitFor(ctx, n.lastSeq(ctx, sid))
}

func (n *Node) apiMessages(ctx context.Context, req apiRequest) (any, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return nil, err
	}
	msgs, err := n.Store.Messages(ctx, req.Session)
	return map[string]any{"session": req.Session, "messages": msgs}, err
}

func (n *Node) apiSteps(ctx context.Context, req apiRequest) (any, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return nil, err
	}
	steps, err := n.Store.Steps(ctx, req.Session)
	return map[string]any{"session": req.Session, "steps": steps}, err
}

func (n *Node) apiEvents(ctx context.Context, req apiRequest) (any, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return nil, err
	}
	evs, last, err := n.Bus.Replay(ctx, req.Session, req.FromSeq)
	if err != nil {
		return nil, err
	}
	if req.Limit > 0 && len(evs) > req.Limit {
		evs = evs[:req.Limit]
	}
	return map[string]any{"session": req.Session, "events": evs, "last_seq": last}, nil
}

// apiCommand publishes a command to the session's input and returns at once
// with the input's id; the outcome goes to reply_to when given.
func (n *Node) apiCommand(cmd bus.Command) func(context.Context, apiRequest) (any, error) {
	return func(ctx context.Context, req apiRequest) (any, error) {
		if err := n.needSession(ctx, req.Session); err != nil {
			return nil, err
		}
		in := bus.Input{Command: cmd, ReplyTo: req.ReplyTo}
		if cmd == bus.CommandCancel {
			in.Reason = req.Reason
		}
		id, err := n.Bus.PublishInput(ctx, req.Session, in)
		if err != nil {
			return nil, err
		}
		return map[string]any{"session": req.Session, "input_id": id, "command": cmd}, nil
	}
}

func (n *Node) apiTools(ctx context.Context, req apiRequest) (any, error) {
	var schemas []llm.ToolSchema
	if n.opts.Tools != nil {
		schemas = n.opts.Tools.Schemas()
	}
	if schemas == nil {
		schemas = []llm.ToolSchema{}
	}
	return map[string]any{"tools": schemas}, nil
}

func (n *Node) apiStatus(ctx context.Context, req apiRequest) (any, error) {
	return map[string]any{
		"node":             n.opts.Session.Node,
		"nats":             n.Bus.ClientURL(),
		"partitions":       n.Bus.Config().Partitions,
		"active_sessions":  n.Sessions.Active(),
		"read_model_at":    n.Projector.Position(),
		"read_model_path":  n.Store.Path(),
		"provider":         n.opts.Provider.Name(),
		"api_version":      APIVersion,
		"problems_skipped": n.Projector.Problems(),
	}, nil
}
