package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Tool is a tool offered by a service on NATS, as discovered by a Registry.
type Tool struct {
	reg      *Registry
	name     string
	desc     string
	schema   json.RawMessage
	service  string
	instance string
	// subject is the endpoint's: tah.tool.<name>, or tah.tool.<ns>.<tool>
	// for a tool its namespace serves.
	subject string
	// ns is the namespace whose service offers the tool, or "".
	ns string
	// tenant is the tenant whose tool it is (offered to its sessions only,
	// by Registry.Tenant), or "" for every tenant's.
	tenant     string
	idempotent bool
	exclusive  bool
	// approval: the service asks for approval of the tool's calls by default.
	approval bool
	timeout  time.Duration
}

var (
	_ tools.IdempotentTool = (*Tool)(nil)
	_ tools.ExclusiveTool  = (*Tool)(nil)
	_ tools.TimeoutTool    = (*Tool)(nil)
	_ tools.RemoteTool     = (*Tool)(nil)
	_ tools.ApprovalTool   = (*Tool)(nil)
)

func (t *Tool) Name() string            { return t.name }
func (t *Tool) Description() string     { return t.desc }
func (t *Tool) Schema() json.RawMessage { return t.schema }
func (t *Tool) Idempotent() bool        { return t.idempotent }
func (t *Tool) Exclusive() bool         { return t.exclusive }
func (t *Tool) Timeout() time.Duration  { return t.timeout }
func (t *Tool) AsksApproval() bool      { return t.approval }

// Runner is wire.RemoteRunner of the service that offers the tool:
// "remote:tah-tool-<name>", or "remote:tah-tools-<ns>" for a namespace's.
func (t *Tool) Runner() string { return wire.RemoteRunner(t.service) }

// Service is the name of the micro service that offers the tool.
func (t *Tool) Service() string { return t.service }

// Run calls the tool: it sends a Request to its endpoint, tah.tool.<name> or
// its namespace's tah.tool.<ns>.<tool> (queue group
// tah-tools) with the call id, session and deadline from ctx (the Executor puts a
// tools.CallInfo there) and waits for the reply. Meanwhile it probes the stored
// call (Config.ProbeEvery): a result stored without a reply is taken, and a
// runner that claimed the call and went away ends it with code "interrupted".
// When ctx is done it publishes a CancelNotice on tah.tool.cancel.<call token>,
// takes a result that was stored just in time, and otherwise returns ctx's error.
func (t *Tool) Run(ctx context.Context, input json.RawMessage) (tools.Result, error) {
	r := t.reg
	info, _ := tools.CallFrom(ctx)
	if info.ID == "" {
		info.ID = event.NewID("call_")
	}
	req := wire.ToolRequest{CallID: info.ID, Session: info.Session, Tool: t.name, Attempt: event.NewID("att_"), Input: input}
	msg := nats.NewMsg(t.subject)
	msg.Header.Set(wire.HeaderCallID, info.ID)
	if info.Session != "" {
		msg.Header.Set(wire.HeaderSession, info.Session)
	}
	// The caller's span (the node's execute_tool) goes with the call, so
	// that a service in any language continues the trace (W3C headers).
	telemetry.Inject(ctx, msg.Header)
	if d, ok := ctx.Deadline(); ok {
		req.Deadline = d.UTC()
		msg.Header.Set(wire.HeaderDeadline, req.Deadline.Format(time.RFC3339Nano))
	}
	body, err := json.Marshal(req)
	if err != nil {
		return tools.Result{}, &tools.ToolError{Code: event.CodeInvalidInput, Err: err}
	}
	msg.Data = body

	replies := make(chan *nats.Msg, 1)
	msg.Reply = r.nc.NewInbox()
	sub, err := r.nc.ChanSubscribe(msg.Reply, replies)
	if err != nil {
		return tools.Result{}, t.unreachable(err)
	}
	defer sub.Unsubscribe()
	if err := sub.AutoUnsubscribe(1); err != nil {
		return tools.Result{}, t.unreachable(err)
	}
	if err := r.nc.PublishMsg(msg); err != nil {
		return tools.Result{}, t.unreachable(err)
	}

	var probe <-chan time.Time
	if r.cfg.ProbeEvery > 0 {
		tick := time.NewTicker(r.cfg.ProbeEvery)
		defer tick.Stop()
		probe = tick.C
	}
	mine := func(s wire.StoredCall) bool { return s.Attempt == req.Attempt }
	for {
		select {
		case m := <-replies:
			return t.reply(m)
		case <-probe:
			s, err := r.results.GetFor(ctx, t.service, t.name, info.Session, info.ID)
			if err != nil || !mine(s) {
				continue // not claimed (yet), or an earlier attempt's record
			}
			if s.State == wire.CallDone && s.Result != nil {
				return *s.Result, nil
			}
			if r.alive(ctx, s) {
				continue
			}
			select {
			case m := <-replies:
				return t.reply(m)
			default:
			}
			if s2, err := r.results.GetFor(ctx, t.service, t.name, info.Session, info.ID); err == nil && mine(s2) && s2.State == wire.CallDone && s2.Result != nil {
				return *s2.Result, nil
			}
			return interrupted(s), nil
		case <-ctx.Done():
			reason := wire.CancelReasonCancelled
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason = wire.CancelReasonTimeout
			}
			notice, _ := json.Marshal(wire.ToolCancel{CallID: info.ID, Session: info.Session, Attempt: req.Attempt, Reason: reason})
			_ = r.nc.Publish(t.cancelSubject(info.ID), notice)
			select {
			case m := <-replies:
				return t.reply(m)
			default:
			}
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
			s, err := r.results.GetFor(lctx, t.service, t.name, info.Session, info.ID)
			cancel()
			if err == nil && mine(s) && s.State == wire.CallDone && s.Result != nil {
				return *s.Result, nil
			}
			return tools.Result{}, ctx.Err()
		}
	}
}

// cancelSubject is where a call of the tool with id callID is cancelled: a
// tenant's tool's, or every tenant's tools'.
func (t *Tool) cancelSubject(callID string) string {
	if t.tenant != "" {
		return wire.TenantToolCancelSubject(t.tenant, callID)
	}
	return wire.ToolCancelSubject(callID)
}

// key is the tool's key in its registry: its name, or for a tenant's tool
// tenantKey(tenant, name).
// askedBy reports whether a discovery's ask a is the one that describes t:
// its own service's, or its namespace's.
func (t *Tool) askedBy(a ask) bool {
	if t.ns != "" {
		return a.ns == t.ns
	}
	return a.ns == "" && a.tool == t.name && a.tenant == t.tenant
}

func (t *Tool) key() string {
	if t.tenant != "" {
		return tenantKey(t.tenant, t.name)
	}
	return t.name
}

// reply decodes a service's reply. No responders is code tool_unavailable:
// the call reached no runner, so running it again is safe (a caller may
// wait for the service, Registry.WaitFor, and call again).
func (t *Tool) reply(m *nats.Msg) (tools.Result, error) {
	if m.Header.Get("Status") == "503" { // no responders: the call reached no one
		t.reg.nudge()
		return tools.Result{}, &tools.ToolError{Code: event.CodeToolUnavailable,
			Err: fmt.Errorf("no runner serves tool %s right now (nothing listens on %s); the call did not run", t.name, t.subject)}
	}
	if status := m.Header.Get(micro.ErrorCodeHeader); status != "" {
		var res tools.Result
		if json.Unmarshal(m.Data, &res) == nil && res.Output != "" {
			res.IsError = true
			if res.Code == "" {
				res.Code = wire.ToolCodeOf(status)
			}
			return res, nil
		}
		desc := m.Header.Get(micro.ErrorHeader)
		if desc == "" {
			desc = "the service reported an error without a description"
		}
		return tools.Failed(wire.ToolCodeOf(status), "Error: "+desc), nil
	}
	var res tools.Result
	if err := json.Unmarshal(m.Data, &res); err != nil {
		return tools.Result{}, &tools.ToolError{Code: event.CodeToolError,
			Err: fmt.Errorf("tool %s (service %s) sent a malformed reply: %v", t.name, t.service, err)}
	}
	return res, nil
}

func (t *Tool) unreachable(err error) error {
	return &tools.ToolError{Code: event.CodeToolError, Err: fmt.Errorf("tool %s cannot be reached: %w", t.name, err)}
}

// interrupted is the result of a call whose runner went away without a result.
func interrupted(s wire.StoredCall) tools.Result {
	return tools.Failed(event.CodeInterrupted, fmt.Sprintf(
		"Error: the runner of tool %s (service %s, instance %s) went away during the call; its outcome is unknown.",
		s.Tool, s.Service, s.Instance))
}
