package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/quota"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/wire"
)

// StartAPI serves the request/reply API as the NATS micro service "tah" with
// endpoints under tah.api. (create, get, list, fork, messages, steps, events,
// request, compact, cancel, resume, tools, status, replay...), and, when the node embeds
// its NATS server, the credentials API (tah.api.creds.*: creds.go).
//
// A worker (Options.Worker) does not serve the endpoints that answer from
// the read model (wire.ReadModelEndpoints): each micro endpoint is a queue
// subscription of its own, so their requests go to the nodes that hold a
// read model only, and none to a node that has nothing to answer them with.
func (n *Node) StartAPI(ctx context.Context) error {
	svc, err := micro.AddService(n.bus.Conn(), micro.Config{
		Name: wire.APIService, Version: wire.APIVersion, QueueGroup: wire.APIQueueGroup,
		Description: "TAH durable agent sessions: the request/reply API (docs/protocol.md)",
		Metadata:    map[string]string{"node": n.opts.Session.Node, "nats": n.bus.ClientURL(), "provider": n.opts.Provider.Name()},
	})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	g := svc.AddGroup(wire.APIGroup)
	handlers := map[string]micro.Handler{
		wire.EndpointCreate:    endpoint(n, wire.EndpointCreate, n.apiCreate),
		wire.EndpointGet:       endpoint(n, wire.EndpointGet, n.apiGet),
		wire.EndpointList:      endpoint(n, wire.EndpointList, n.apiList),
		wire.EndpointFork:      endpoint(n, wire.EndpointFork, n.apiFork),
		wire.EndpointMessages:  endpoint(n, wire.EndpointMessages, n.apiMessages),
		wire.EndpointSteps:     endpoint(n, wire.EndpointSteps, n.apiSteps),
		wire.EndpointEvents:    endpoint(n, wire.EndpointEvents, n.apiEvents),
		wire.EndpointRequest:   endpoint(n, wire.EndpointRequest, n.apiRequest),
		wire.EndpointCompact:   endpoint(n, wire.EndpointCompact, n.apiCommand(wire.CommandCompact)),
		wire.EndpointResume:    endpoint(n, wire.EndpointResume, n.apiCommand(wire.CommandResume)),
		wire.EndpointCancel:    endpoint(n, wire.EndpointCancel, n.apiCommand(wire.CommandCancel)),
		wire.EndpointApprove:   endpoint(n, wire.EndpointApprove, n.apiCommand(wire.CommandApprove)),
		wire.EndpointDeny:      endpoint(n, wire.EndpointDeny, n.apiCommand(wire.CommandDeny)),
		wire.EndpointBudget:    endpoint(n, wire.EndpointBudget, n.apiCommand(wire.CommandBudget)),
		wire.EndpointTools:     endpoint(n, wire.EndpointTools, n.apiTools),
		wire.EndpointStatus:    endpoint(n, wire.EndpointStatus, n.apiStatus),
		wire.EndpointArtifacts: endpoint(n, wire.EndpointArtifacts, n.apiArtifacts),
		wire.EndpointArtifact:  endpoint(n, wire.EndpointArtifact, n.apiArtifact),

		wire.EndpointSchedule:   endpoint(n, wire.EndpointSchedule, n.apiSchedule),
		wire.EndpointSchedules:  endpoint(n, wire.EndpointSchedules, n.apiSchedules),
		wire.EndpointUnschedule: endpoint(n, wire.EndpointUnschedule, n.apiUnschedule),
		wire.EndpointReplay:     endpoint(n, wire.EndpointReplay, n.apiReplay),
		wire.EndpointReplayLive: endpoint(n, wire.EndpointReplayLive, n.apiReplayLive),
	}
	for name := range handlers {
		if n.store == nil && slices.Contains(wire.ReadModelEndpoints(), name) {
			delete(handlers, name)
		}
	}
	for name, h := range handlers {
		if err := g.AddEndpoint(name, h); err != nil {
			svc.Stop()
			return fmt.Errorf("api endpoint %s: %w", name, err)
		}
	}
	// The commands again, on the subjects that name their sender
	// (tah.api.<endpoint>.by.<name>), which a credential's permissions
	// allow it in place of the unnamed ones.
	for _, name := range wire.CommandEndpoints() {
		h, ok := handlers[name]
		if !ok {
			continue
		}
		if err := g.AddEndpoint(name+"-by", h, micro.WithEndpointSubject(wire.NamedAPIEndpointSubject(name))); err != nil {
			svc.Stop()
			return fmt.Errorf("api endpoint %s: %w", wire.NamedAPIEndpointSubject(name), err)
		}
	}
	if err := addTenantEndpoints(svc, handlers); err != nil {
		svc.Stop()
		return err
	}
	if err := n.addCredsEndpoints(ctx, svc); err != nil {
		svc.Stop()
		return err
	}
	n.closers = append(n.closers, func(context.Context) error { return svc.Stop() })
	// The endpoints reach the server before StartAPI returns: a request made
	// right after it must not meet "no responders".
	if err := n.bus.Conn().FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}

// apiError is an error with the API error code (wire.APIErr*) to reply with.
type apiError struct {
	code string
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{wire.APIErrBadRequest, fmt.Errorf(format, args...)}
}

// endpoint is the micro handler of an API endpoint whose request is a Req and
// whose reply is a Rep: it decodes the request (fields it does not know are
// ignored), calls h and sends the reply, or the error with its code.
func endpoint[Req, Rep any](n *Node, name string, h func(context.Context, Req) (Rep, error)) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		// The node may write every subject: it answers only inboxes, never
		// a reply subject a client aimed at the log, an input or a bucket.
		if err := wire.CheckReplySubject(r.Reply()); err != nil {
			n.Metrics.errors.WithLabelValues("api").Inc()
			n.log.Warn("api request dropped: its reply subject is not an inbox", "endpoint", name, "err", err)
			return
		}
		var req Req
		if data := r.Data(); len(data) > 0 {
			if err := json.Unmarshal(data, &req); err != nil {
				r.Error(wire.APIErrBadRequest, "the request is not the JSON object of "+wire.APISubject(name)+": "+err.Error(), nil)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if sender, ok := wire.APISender(r.Subject()); ok {
			ctx = context.WithValue(ctx, apiSenderKey{}, sender)
		}
		var gen uint64
		if n.store != nil {
			gen = n.store.Generation()
		}
		res, err := h(ctx, req)
		if err != nil {
			if p := n.projector(); p != nil {
				p.Rebuild(gen, err) // a damaged read model is rebuilt, not served
			}
			code := wire.APIErrInternal
			var ae *apiError
			switch {
			case errors.As(err, &ae):
				code = ae.code
			case errors.Is(err, store.ErrNotFound), errors.Is(err, session.ErrUnknownSession):
				code = wire.APIErrNotFound
			case errors.Is(err, event.ErrInvalidSessionID), errors.Is(err, wire.ErrMalformedInput), errors.Is(err, store.ErrInvalidCursor):
				code = wire.APIErrBadRequest
			case errors.Is(err, session.ErrExists):
				code = wire.APIErrConflict
			}
			var qe *quota.ExceededError
			if errors.As(err, &qe) {
				// The quota's figures, for a program to act on (wait, or
				// tell its user); the description says it for people.
				body, _ := json.Marshal(wire.QuotaError{Error: event.CodeQuotaExceeded, QuotaReached: qe.Reached})
				r.Error(wire.APIErrQuota, err.Error(), body)
				return
			}
			r.Error(code, err.Error(), nil)
			return
		}
		body, err := json.Marshal(res)
		if err != nil {
			r.Error(wire.APIErrInternal, "the reply cannot be encoded: "+err.Error(), nil)
			return
		}
		if limit := n.replyLimit(); len(body) > limit {
			r.Error(wire.APIErrTooLarge, fmt.Sprintf("the reply of %s is %d bytes, over the %d a NATS message holds here: %s",
				wire.APISubject(name), len(body), limit, askForLess(name)), nil)
			return
		}
		if err := r.Respond(body); err != nil {
			n.log.Warn("api reply not sent", "endpoint", name, "err", err)
		}
	})
}

// replyLimit is the largest body of an API reply: the connection's max
// payload, less room for the headers.
func (n *Node) replyLimit() int { return int(n.bus.Conn().MaxPayload()) - 4096 }

// askForLess says how to get a reply that was too large in parts.
func askForLess(endpoint string) string {
	if endpoint == wire.EndpointRequest {
		return "read the log in pages (" + wire.APISubject(wire.EndpointEvents) + ") and rebuild the request with the Go package projection (RebuildRequest)"
	}
	return "ask for less (limit, from_seq; brief for steps)"
}

func (n *Node) needSession(ctx context.Context, id string) error {
	if id == "" {
		return badRequest("no session given: set \"session\" to a session id (tahctl list shows them)")
	}
	if err := event.ValidSessionID(id); err != nil {
		return err
	}
	if n.store != nil {
		// The one column of the session's row, not its summary: every
		// request that names a session asks this first.
		if seq, err := n.store.LastSeq(ctx, id); err == nil && seq > 0 {
			return nil
		}
	}
	// Not in the read model (yet), or no read model here: the log decides.
	evs, _, err := n.bus.Replay(ctx, id, 1)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return &apiError{wire.APIErrNotFound, fmt.Errorf("session %s not found (tahctl list shows the sessions)", id)}
	}
	return nil
}

func (n *Node) apiCreate(ctx context.Context, req wire.CreateRequest) (wire.CreateReply, error) {
	sid := req.Session
	if req.Tenant != "" {
		if err := event.ValidTenant(req.Tenant); err != nil {
			return wire.CreateReply{}, badRequest("tenant: %v", err)
		}
		if sid != "" && event.TenantOf(sid) != req.Tenant {
			return wire.CreateReply{}, badRequest("session %q is not of tenant %q: give the tenant's ids as %s.<id>", sid, req.Tenant, req.Tenant)
		}
	}
	if sid == "" {
		sid = event.InTenant(req.Tenant, event.NewSessionID())
	}
	if err := wire.CheckLabels(req.Labels); err != nil {
		return wire.CreateReply{}, &apiError{wire.APIErrBadRequest, fmt.Errorf("%w (limits: docs/protocol.md, tah.api.create)", err)}
	}
	if req.Budget != nil {
		if err := req.Budget.Validate(); err != nil {
			return wire.CreateReply{}, badRequest("budget: %v", err)
		}
	}
	made, err := n.countSession(ctx, sid)
	if err != nil {
		return wire.CreateReply{}, err
	}
	ev, err := session.CreateWithBudget(ctx, n.bus, sid, n.opts.Session, req.Labels, req.Budget)
	if made(err) != nil {
		return wire.CreateReply{}, err
	}
	return wire.CreateReply{Session: sid, Seq: ev.Seq}, nil
}

// countSession counts session sid, about to be made, in its tenant's
// quota of sessions (package quota), or fails with a *quota.ExceededError
// when the quota is used up. The caller hands made the outcome of the
// making: a session not made is taken back from the count. The default
// tenant's sessions are not counted.
func (n *Node) countSession(ctx context.Context, sid string) (made func(error) error, err error) {
	undo, err := n.quotas.AddSession(ctx, event.TenantOf(sid))
	if err != nil {
		return nil, err
	}
	return func(err error) error {
		if err != nil {
			undo(context.WithoutCancel(ctx))
		}
		return err
	}, nil
}

// apiGet answers from the read model once it has applied the session's
// shard up to its head (a turn whose outcome the client holds is in the
// answer, whichever node ran it); under load it waits for that at most
// readFlushWithin and answers with what is applied. A session the read
// model has no row of yet is waited for until its last record.
func (n *Node) apiGet(ctx context.Context, req wire.SessionRequest) (wire.SessionSummary, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.SessionSummary{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, readFlushWithin)
	if head, err := n.bus.Head(wctx, n.bus.ShardOf(req.Session)); err == nil {
		_ = n.projector().WaitFor(wctx, req.Session, head) // behind: the read says what is applied
	}
	cancel()
	row, err := n.store.GetSession(ctx, req.Session)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return row, err
	}
	if err := n.projector().WaitFor(ctx, req.Session, n.lastSeq(ctx, req.Session)); err != nil {
		return wire.SessionSummary{}, err
	}
	return n.store.GetSession(ctx, req.Session)
}

// lastSeq is the sequence of session sid's last record, 0 when it cannot be
// read (the read model is then used as it is).
func (n *Node) lastSeq(ctx context.Context, sid string) uint64 {
	last, err := n.bus.LastSeq(ctx, sid)
	if err != nil {
		return 0
	}
	return last
}

func (n *Node) apiList(ctx context.Context, req wire.ListRequest) (wire.ListReply, error) {
	limit := req.Limit
	if limit <= 0 || limit > wire.ListMax {
		limit = wire.ListDefault
	}
	// A page is cut to what one reply holds, so that no session, however
	// large its row, makes the listing fail for everyone (Next goes on).
	if req.Tenant != "" {
		if err := event.ValidTenant(req.Tenant); err != nil {
			return wire.ListReply{}, badRequest("tenant: %v", err)
		}
	}
	flush := n.projector().Flush
	if req.Known {
		flush = n.projector().FlushKnown
	}
	n.flushReadModel(ctx, flush)
	page, err := n.store.ListSessions(ctx, store.ListOptions{Status: req.Status, Tenant: req.Tenant, Limit: limit, Offset: req.Offset, Before: req.Before,
		MaxBytes: n.replyLimit()})
	if err != nil {
		return wire.ListReply{}, err
	}
	if page.Sessions == nil {
		page.Sessions = []wire.SessionSummary{}
	}
	return wire.ListReply{Sessions: page.Sessions, Next: page.Next}, nil
}

func (n *Node) apiFork(ctx context.Context, req wire.ForkRequest) (wire.ForkReply, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.ForkReply{}, err
	}
	opts := session.ForkOptions{Turns: -1, AtStep: req.AtStep}
	if req.Turns != nil {
		if req.AtStep != "" {
			return wire.ForkReply{}, badRequest("turns and at_step both say where the fork ends: give one")
		}
		if *req.Turns < 0 {
			return wire.ForkReply{}, badRequest("turns is negative: give the number of turns to keep, 0 for only the system message")
		}
		opts.Turns = *req.Turns
		// More turns than the session has would silently copy them all.
		have, err := n.sessionTurns(ctx, req.Session)
		if err != nil {
			return wire.ForkReply{}, err
		}
		if have >= 0 && opts.Turns > have {
			return wire.ForkReply{}, badRequest("session %s has %d turn(s): turns may be 0 to %d (leave it out to keep them all)", req.Session, have, have)
		}
	}
	if e := req.Edit; e != nil {
		if err := e.Validate(); err != nil {
			return wire.ForkReply{}, badRequest("%v", err)
		}
		opts.Edit = &projection.Edit{Message: e.Message, Turn: e.Turn, CallID: e.ToolResult, StepID: e.Step,
			Content: e.Content, IsError: e.IsError, By: e.By}
	}
	sid := event.InTenant(event.TenantOf(req.Session), event.NewSessionID()) // a fork stays in its tenant
	made, err := n.countSession(ctx, sid)
	if err != nil {
		return wire.ForkReply{}, err
	}
	f, err := session.Fork(ctx, n.bus, req.Session, sid, opts, n.opts.Session)
	switch err = made(err); {
	case errors.Is(err, projection.ErrUnknownStep):
		return wire.ForkReply{}, &apiError{wire.APIErrNotFound, fmt.Errorf("%w (tahctl show %s lists its steps)", err, req.Session)}
	case errors.Is(err, projection.ErrBadFork):
		return wire.ForkReply{}, badRequest("%v", err)
	case err != nil:
		return wire.ForkReply{}, err
	}
	return wire.ForkReply{Session: sid, ForkedFrom: req.Session, Seq: f.Event.Seq, AtStep: req.AtStep, OpenTurn: f.OpenTurn, Edit: f.Edit}, nil
}

// sessionTurns is the number of turns of session sid: from the read model
// once it has caught up with the log, or, on a worker, from the fold of the
// session's log (a fork reads it whole anyway); -1 when it cannot be told.
func (n *Node) sessionTurns(ctx context.Context, sid string) (int, error) {
	if n.store == nil {
		evs, _, err := n.bus.Replay(ctx, sid, 1)
		if err != nil {
			return 0, err
		}
		var st projection.State
		if projection.FoldLog(&st, evs) != nil {
			return -1, nil // the fork says what is wrong with the log
		}
		return st.Turn, nil
	}
	if err := n.readModel(ctx, sid); err != nil {
		return 0, err
	}
	row, err := n.store.GetSession(ctx, sid)
	if err != nil {
		return -1, nil
	}
	return row.Turn, nil
}

// flushReadModel lets the read model apply, before a read that waits for no
// given record, every record appended to the log (flush is the projector's
// Flush: list, where a turn whose outcome its client has is then in the
// answer, whichever node ran it) or every record this node knows of
// (FlushKnown: a takeover's look for open turns), however long the
// projector's batches linger for more (projectorLinger). Under load the
// wait is cut at readFlushWithin, and the read answers from what is
// applied.
func (n *Node) flushReadModel(ctx context.Context, flush func(context.Context) error) {
	if n.store == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, readFlushWithin)
	defer cancel()
	_ = flush(fctx) // behind: the read says what is applied
}

// readFlushWithin bounds flushReadModel's wait.
const readFlushWithin = time.Second

// readModel answers from the read model once it has caught up with the log.
func (n *Node) readModel(ctx context.Context, sid string) error {
	if err := n.needSession(ctx, sid); err != nil {
		return err
	}
	return n.projector().WaitFor(ctx, sid, n.lastSeq(ctx, sid))
}

func (n *Node) apiMessages(ctx context.Context, req wire.SessionRequest) (wire.MessagesReply, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return wire.MessagesReply{}, err
	}
	msgs, err := n.store.Messages(ctx, req.Session)
	return wire.MessagesReply{Session: req.Session, Messages: msgs}, err
}

// briefOutput is how much of a tool's output a brief steps reply keeps.
const briefOutput = 2000

func (n *Node) apiSteps(ctx context.Context, req wire.StepsRequest) (wire.StepsReply, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return wire.StepsReply{}, err
	}
	steps, err := n.store.Steps(ctx, req.Session)
	if err == nil && req.Brief {
		for i := range steps {
			if out := steps[i].Output; len(out) > briefOutput {
				r := []rune(out)
				if len(r) > briefOutput {
					steps[i].Output = string(r[:briefOutput]) + fmt.Sprintf("\n[… %d lines, %d characters in all]",
						strings.Count(strings.TrimRight(out, "\n"), "\n")+1, len(r))
				}
			}
		}
	}
	return wire.StepsReply{Session: req.Session, Steps: steps}, err
}

func (n *Node) apiEvents(ctx context.Context, req wire.EventsRequest) (wire.EventsReply, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.EventsReply{}, err
	}
	evs, last, err := n.bus.Replay(ctx, req.Session, req.FromSeq)
	if err != nil {
		return wire.EventsReply{}, err
	}
	if req.Limit > 0 && len(evs) > req.Limit {
		// Whole records: the next page starts after the last one sent.
		end := req.Limit
		for end < len(evs) && evs[end].Seq == evs[end-1].Seq {
			end++
		}
		evs = evs[:end]
	}
	if evs == nil {
		evs = []event.Event{}
	}
	return wire.EventsReply{Session: req.Session, Events: evs, LastSeq: last}, nil
}

// apiRequest rebuilds the request an LLM step sent from the session's log,
// and checks it against the hash its llm.started recorded.
func (n *Node) apiRequest(ctx context.Context, req wire.StepRef) (wire.RequestReply, error) {
	if err := n.needSession(ctx, req.Session); err != nil {
		return wire.RequestReply{}, err
	}
	if req.StepID == "" {
		return wire.RequestReply{}, badRequest("no step given: set \"step_id\" to the id of an LLM step (tahctl show --json %s lists them)", req.Session)
	}
	evs, _, err := n.bus.Replay(ctx, req.Session, 1)
	if err != nil {
		return wire.RequestReply{}, err
	}
	r, err := projection.RebuildRequest(evs, req.StepID)
	switch {
	case errors.Is(err, projection.ErrUnknownStep):
		return wire.RequestReply{}, &apiError{wire.APIErrNotFound, fmt.Errorf("session %s has no step %s (tahctl show --json %s lists its steps)", req.Session, req.StepID, req.Session)}
	case errors.Is(err, projection.ErrNotLLMStep):
		return wire.RequestReply{}, badRequest("%v: only an LLM step sends a request to the model", err)
	case err != nil:
		return wire.RequestReply{}, fmt.Errorf("session %s: %w", req.Session, err)
	}
	return wire.RequestReply{Session: req.Session, StepID: req.StepID, Request: r.Request, SHA256: r.SHA256,
		Verified: r.Verified, Recorded: r.Recorded}, nil
}

// apiSenderKey keys, in a request's context, the credential's name its
// subject named (wire.APISender).
type apiSenderKey struct{}

// apiCommand publishes a command to the session's input and returns at once
// with the input's id; the outcome goes to reply_to when given. A request
// whose subject named its sender (wire.APISender) stores an input that
// names it: turn.started, agent.cancelled and a decision record it.
func (n *Node) apiCommand(cmd wire.Command) func(context.Context, wire.CommandRequest) (wire.CommandReply, error) {
	return func(ctx context.Context, req wire.CommandRequest) (wire.CommandReply, error) {
		if err := n.needSession(ctx, req.Session); err != nil {
			return wire.CommandReply{}, err
		}
		in := wire.Input{Command: cmd, ReplyTo: req.ReplyTo}
		switch cmd {
		case wire.CommandCancel:
			in.Reason = req.Reason
		case wire.CommandApprove, wire.CommandDeny, wire.CommandBudget:
			in.Decision, in.Budget = req.Decision, req.Budget
			if err := in.Validate(); err != nil {
				return wire.CommandReply{}, badRequest("%v", err)
			}
		}
		if sender, ok := ctx.Value(apiSenderKey{}).(string); ok {
			in.Sender = wire.AttestedSenderPrefix + sender
			if in.Decision != nil {
				// Also for a credential named like the node's own tokens
				// (node, anon), which the input's sender cannot tell.
				in.Decision.By = sender
			}
		}
		id, err := n.bus.PublishInput(ctx, req.Session, in)
		if err != nil {
			return wire.CommandReply{}, err
		}
		return wire.CommandReply{Session: req.Session, InputID: id, Command: cmd}, nil
	}
}

func (n *Node) apiTools(ctx context.Context, req wire.ToolsRequest) (wire.ToolsReply, error) {
	if req.Tenant != "" && event.ValidTenant(req.Tenant) != nil {
		return wire.ToolsReply{}, badRequest("tenant: %v", event.ValidTenant(req.Tenant))
	}
	if n.remote != nil {
		// Discovery follows the services' comings and goings by events
		// (remote.Registry); a person asking what the model may call wants
		// a service that started a moment ago, before any event, too.
		if err := n.remote.Refresh(ctx); err != nil {
			n.log.Debug("remote tools not refreshed", "err", err)
		}
	}
	cat, mcp := n.tools, n.MCPServers()
	if req.Tenant != "" {
		// A tenant sees what its sessions are offered, not how the node
		// bridges its MCP servers (the operator's).
		mcp = nil
		if n.forTenant != nil {
			cat, _ = n.forTenant(req.Tenant)
		}
	}
	var schemas []llm.ToolSchema
	if cat != nil {
		schemas = cat.Schemas()
	}
	if schemas == nil {
		schemas = []llm.ToolSchema{}
	}
	r := wire.ToolsReply{Tools: schemas, MCPServers: mcp}
	for _, s := range schemas {
		tool, _ := cat.Tool(s.Name)
		if n.opts.Approval.NeedsTool(s.Name, tool) {
			r.Approval = append(r.Approval, s.Name)
		}
	}
	return r, nil
}

func (n *Node) apiStatus(ctx context.Context, _ wire.EmptyRequest) (wire.StatusReply, error) {
	r := wire.StatusReply{
		Node:           n.opts.Session.Node,
		NATS:           n.bus.ClientURL(),
		Partitions:     n.bus.Config().Partitions,
		ActiveSessions: n.sessions.Active(),
		LogShards:      n.bus.Shards(),
		Provider:       n.opts.Provider.Name(),
		APIVersion:     wire.APIVersion,
		MaxInputBytes:  n.maxInputBytes(),
		Nodes:          []wire.NodeRecord{},
	}
	if p := n.projector(); p != nil {
		r.ReadModelAt, r.ReadModelPath, r.ProblemsSkipped = p.Positions(), n.store.Path(), p.Problems()
	} else {
		r.Worker = n.store == nil
	}
	// Bounded: while NATS elects a new leader for the bucket, the rest of the
	// reply is still worth having.
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	nodes, err := n.bus.ListNodes(lctx)
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
