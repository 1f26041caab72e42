package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// admitTimeout bounds the admission of one prompt: its session created or
// checked, its input stored.
const admitTimeout = 30 * time.Second

// prompt takes a prompt request of inst. A request whose reply subject is
// not under an inbox prefix gets nothing (it could name any subject); one
// more than MaxConcurrent admissions at once gets 429; the rest is admitted
// in a goroutine of its own, so that a slow admission holds no other.
func (g *Gateway) prompt(inst *instance, r micro.Request) {
	reply := r.Reply()
	if err := wire.CheckReplySubject(reply); err != nil {
		g.log.Warn("agent prompt dropped: its reply subject is not an inbox", "instance", inst.name, "err", err)
		return
	}
	sender, e, status := g.senderOf(r)
	if e != nil {
		g.fail(reply, status, *e)
		return
	}
	select {
	case g.sem <- struct{}{}:
	default:
		g.fail(reply, wire.AgentStatusRateLimited, wire.AgentError{Error: wire.AgentErrRateLimited,
			Message: fmt.Sprintf("this node admits %d prompts at once; try again in a second", g.opts.MaxConcurrent), RetryAfterS: 1})
		return
	}
	data := append([]byte(nil), r.Data()...)
	// The caller's W3C trace context goes on with the input: the turn's
	// span is its child (a malformed one is ignored).
	trace := telemetry.ParentOf(telemetry.Extract(context.Background(), nats.Header(r.Headers())))
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() { <-g.sem }()
		g.admit(inst, reply, sender, data, trace)
	}()
}

// admit turns a prompt into a turn: the request parsed (400), its session
// created (the controller) or checked (404), the ack (and, from the
// controller, the session's id), then the run stored with the caller's
// reply subject, to be answered as a stream by whichever node works on it.
func (g *Gateway) admit(inst *instance, reply string, sender *wire.AgentSender, data []byte, trace telemetry.Parent) {
	ctx, cancel := context.WithTimeout(trace.Context(context.Background()), admitTimeout)
	defer cancel()
	env, err := ParseRequest(data)
	var text string
	if err == nil {
		text, err = userText(env)
	}
	if err != nil {
		g.fail(reply, wire.AgentStatusBadRequest, wire.AgentError{Error: wire.AgentErrBadRequest, Message: err.Error()})
		return
	}
	if limit := g.opts.Host.MaxInputBytes(); len(text) > limit {
		g.fail(reply, wire.AgentStatusBadRequest, wire.AgentError{Error: wire.AgentErrTooLarge,
			Message: fmt.Sprintf("the prompt and its attachments are %d bytes, over this agent's limit of %d bytes: send less, or a file a tool can read", len(text), limit)})
		return
	}
	sid := inst.session
	named := env.Session
	if inst.tenant != "" && named != "" && event.TenantOf(named) == "" {
		named = inst.tenant + "." + named // a tenant's session by its id within the tenant (its instance's name)
	}
	switch {
	case sid != "" && named != "" && named != sid:
		g.fail(reply, wire.AgentStatusBadRequest, wire.AgentError{Error: wire.AgentErrBadRequest,
			Message: fmt.Sprintf("this instance is session %s, not %s: prompt the controller (%s) to name another", sid, env.Session, wire.AgentController)})
		return
	case sid == "" && named != "" && inst.tenant != "" && event.TenantOf(named) != inst.tenant:
		// A tenant's controller continues the tenant's sessions only: any
		// other is not found, as the tenant's API answers.
		g.fail(reply, wire.AgentStatusNotFound, wire.AgentError{Error: wire.AgentErrNotFound, Session: env.Session,
			Message: fmt.Sprintf("session %s not found (tenant %s's sessions are %s.<id>)", env.Session, inst.tenant, inst.tenant)})
		return
	case sid == "" && named != "":
		if err := g.opts.Host.CheckSession(ctx, named); err != nil {
			status, code := wire.AgentStatusInternal, wire.AgentErrInternal
			if errors.Is(err, ErrNoSession) {
				status, code = wire.AgentStatusNotFound, wire.AgentErrNotFound
			}
			g.fail(reply, status, wire.AgentError{Error: code, Message: err.Error(), Session: env.Session})
			return
		}
		sid = named
	case sid == "":
		if sid, err = g.opts.Host.CreateSession(ctx, inst.tenant); err != nil {
			code := wire.AgentErrInternal
			if errors.Is(err, ErrQuotaExceeded) {
				code = wire.CodeQuotaExceeded
			}
			g.fail(reply, wire.AgentStatusOf(code), wire.AgentError{Error: code, Message: "the session was not created: " + err.Error()})
			return
		}
	}
	// The ack (and the session's id) first, and flushed, before the input
	// is stored: the node that runs the turn streams on the same subject.
	_ = natsx.PublishChunk(g.nc, reply, wire.ChunkStatus, wire.StatusAck)
	if inst.session == "" {
		_ = natsx.PublishChunk(g.nc, reply, wire.ChunkStatus, wire.StatusSessionPrefix+sid)
	}
	if err := g.nc.FlushWithContext(ctx); err != nil {
		g.log.Debug("agent ack not flushed", "session", sid, "err", err)
	}
	// A busy session refuses the prompt (409), unless it asks to steer or
	// interrupt the turn that runs.
	opts := &wire.RunOptions{IfIdle: true}
	if env.WhenBusy != "" {
		opts = &wire.RunOptions{WhenBusy: env.WhenBusy}
	}
	in := wire.Input{Command: wire.CommandRun, ReplyTo: reply, Reply: wire.ReplyAgents, Text: text, Options: opts}
	if sender != nil {
		in.Sender = AttestedToken(*sender, g.opts.SenderName) // a verified caller: turn.started records it
	}
	if _, err := g.opts.Host.PublishInput(ctx, sid, in); err != nil {
		status, code := wire.AgentStatusInternal, wire.AgentErrInternal
		if errors.Is(err, nats.ErrMaxPayload) {
			status, code = wire.AgentStatusBadRequest, wire.AgentErrTooLarge
		}
		g.fail(reply, status, wire.AgentError{Error: code, Message: "the prompt was not stored: " + err.Error(), Session: sid})
	}
}

func publishJSON(nc *nats.Conn, subj string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return nc.Publish(subj, b)
}
