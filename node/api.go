package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	APITooLarge   = "413" // the reply would not fit in one NATS message: ask for less
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
	// Brief, for steps, leaves out each LLM step's request (the whole context
	// sent, which grows with the session) and cuts tool outputs to a preview.
	Brief bool `json:"brief,omitempty"`
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
		Metadata:    map[string]string{"node": n.opts.Session.Node, "nats": n.Bus.ClientURL(), "provider": n.opts.Provider.Name()},
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
	// The endpoints reach the server before StartAPI returns: a request made
	// right after it must not meet "no responders".
	if err := n.Bus.Conn().FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("api: %w", err)
	}
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
		body, err := json.Marshal(res)
		if err != nil {
			r.Error(APIInternal, "the reply cannot be encoded: "+err.Error(), nil)
			return
		}
		if limit := int(n.Bus.Conn().MaxPayload()) - 4096; len(body) > limit {
			r.Error(APITooLarge, fmt.Sprintf("the reply of tah.api.%s is %d bytes, over the %d a NATS message holds here: ask for less (limit, from_seq; brief for steps)",
				name, len(body), limit), nil)
			return
		}
		if err := r.Respond(body); err != nil {
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
		return viewOf(row), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err := n.Projector.WaitFor(ctx, n.lastSeq(ctx, req.Session)); err != nil {
		return nil, err
	}
	row, err = n.Store.GetSession(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	return viewOf(row), nil
}

// SessionView is a session as get and list return it (JSON, snake_case): the
// read model's row without its histories.
type SessionView struct {
	ID         string            `json:"id"`
	Status     projection.Status `json:"status"`
	Turn       int               `json:"turn"`
	Title      string            `json:"title"`
	Config     event.Config      `json:"config"`
	ForkedFrom string            `json:"forked_from,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Epoch      uint64            `json:"epoch"`
	Node       string            `json:"node,omitempty"`
	CreatedAt  time.Time         `json:"created_at,omitzero"`
	UpdatedAt  time.Time         `json:"updated_at,omitzero"`
	LastSeq    uint64            `json:"last_seq"`
	Events     int               `json:"events"`
	Rejected   int               `json:"rejected,omitempty"`
	Messages   int               `json:"messages"`
	Steps      int               `json:"steps"`
	Usage      llm.Usage         `json:"usage"`
	Summaries  int               `json:"summaries,omitempty"`
	Trims      int               `json:"trims,omitempty"`
	LastOutput string            `json:"last_output,omitempty"`
	LastError  string            `json:"last_error,omitempty"`
	LastCode   string            `json:"last_code,omitempty"`
}

func viewOf(r store.SessionRow) SessionView {
	return SessionView{ID: r.ID, Status: r.Status, Turn: r.Turn, Title: r.Title, Config: r.Config, ForkedFrom: r.ForkedFrom,
		Labels: r.Labels, Epoch: r.Epoch, Node: r.Node, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LastSeq: r.LastSeq,
		Events: r.Events, Rejected: r.Rejected, Messages: r.Messages, Steps: r.Steps, Usage: r.Usage,
		Summaries: r.Summaries, Trims: r.Trims, LastOutput: r.LastOutput, LastError: r.LastError, LastCode: r.LastCode}
}

// ListView is what list returns: a page of sessions, newest first, and the
// "before" of the next page (empty on the last one).
type ListView struct {
	Sessions []SessionView `json:"sessions"`
	Next     string        `json:"next,omitempty"`
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
	page, err := n.Store.ListSessions(ctx, store.ListOptions{Status: projection.Status(req.Status), Limit: limit, Offset: req.Offset, Before: req.Before})
	if err != nil {
		return nil, err
	}
	out := ListView{Sessions: make([]SessionView, 0, len(page.Sessions)), Next: page.Next}
	for _, r := range page.Sessions {
		out.Sessions = append(out.Sessions, viewOf(r))
	}
	return out, nil
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

// briefOutput is how much of a tool's output a brief steps reply keeps.
const briefOutput = 2000

func (n *Node) apiSteps(ctx context.Context, req apiRequest) (any, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return nil, err
	}
	steps, err := n.Store.Steps(ctx, req.Session)
	if err == nil && req.Brief {
		for i := range steps {
			steps[i].Request = nil
			if out := steps[i].Output; len(out) > briefOutput {
				r := []rune(out)
				if len(r) > briefOutput {
					steps[i].Output = string(r[:briefOutput]) + fmt.Sprintf("\n[… %d lines, %d characters in all]",
						strings.Count(strings.TrimRight(out, "\n"), "\n")+1, len(r))
				}
			}
		}
	}
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
	if n.remote != nil {
		// Discovery runs in the background every 30s; a person asking what the
		// model may call wants the tool service started a moment ago too.
		if err := n.remote.Refresh(ctx); err != nil {
			n.log.Debug("remote tools not refreshed", "err", err)
		}
	}
	var schemas []llm.ToolSchema
	if n.tools != nil {
		schemas = n.tools.Schemas()
	}
	if schemas == nil {
		schemas = []llm.ToolSchema{}
	}
	return map[string]any{"tools": schemas}, nil
}

// StatusReply is what tah.api.status returns: the node that answered, and
// every live node of the cluster as the KV bucket tah_nodes has it.
type StatusReply struct {
	Node            string `json:"node"`
	NATS            string `json:"nats"`
	Partitions      int    `json:"partitions"`
	ActiveSessions  int    `json:"active_sessions"`
	ReadModelAt     uint64 `json:"read_model_at"`
	ReadModelPath   string `json:"read_model_path"`
	Provider        string `json:"provider"`
	APIVersion      string `json:"api_version"`
	ProblemsSkipped int64  `json:"problems_skipped"`
	// Time is the answering node's clock when it read Nodes: a client measures
	// the nodes' heartbeat ages against it rather than against its own clock.
	Time time.Time `json:"time"`
	// Nodes are the entries of tah_nodes written within the node TTL, sorted
	// by node id: the nodes the cluster counts on, with the partitions each
	// pulls. Empty (never null) when they could not be read; NodesError says
	// why. A status is most wanted when something is wrong, so a failure to
	// read the bucket does not fail the whole reply.
	Nodes      []bus.NodeRecord `json:"nodes"`
	NodesError string           `json:"nodes_error,omitempty"`
}

func (n *Node) apiStatus(ctx context.Context, req apiRequest) (any, error) {
	r := StatusReply{
		Node:            n.opts.Session.Node,
		NATS:            n.Bus.ClientURL(),
		Partitions:      n.Bus.Config().Partitions,
		ActiveSessions:  n.Sessions.Active(),
		ReadModelAt:     n.Projector.Position(),
		ReadModelPath:   n.Store.Path(),
		Provider:        n.opts.Provider.Name(),
		APIVersion:      APIVersion,
		ProblemsSkipped: n.Projector.Problems(),
		Nodes:           []bus.NodeRecord{},
	}
	// Bounded: while NATS elects a new leader for the bucket, the rest of the
	// reply is still worth having.
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	nodes, err := n.Bus.ListNodes(lctx)
	cancel()
	if err != nil {
		r.NodesError = err.Error()
	} else if nodes != nil {
		r.Nodes = nodes
	}
	r.Time = time.Now().UTC()
	return r, nil
}

// ToolSchemas lists the tools the node offers to the model: local and, when
// remote tools are on, those the tool services offered at the last refresh.
func (n *Node) ToolSchemas() []llm.ToolSchema {
	if n.tools == nil {
		return nil
	}
	return n.tools.Schemas()
}
