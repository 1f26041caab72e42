package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// ErrNoSession is what Host.CheckSession wraps for a session that does not
// exist: the prompt gets 404.
var ErrNoSession = errors.New("no such session")

// ErrQuotaExceeded is what Host.CreateSession wraps when the tenant's
// sessions quota is used up: the prompt gets 429, code quota_exceeded.
var ErrQuotaExceeded = errors.New("quota exceeded")

// Host is what the gateway needs of its node: sessions created, checked and
// given inputs, on the node's own connection (the gateway's may touch no
// subject of TAH's).
type Host interface {
	// CreateSession creates a session of tenant ("": the default tenant's)
	// with the node's configuration.
	CreateSession(ctx context.Context, tenant string) (string, error)
	// CheckSession fails, wrapping ErrNoSession, when sid names no session.
	CheckSession(ctx context.Context, sid string) error
	// PublishInput stores an input of session sid (TAH_IN).
	PublishInput(ctx context.Context, sid string, in wire.Input) (string, error)
	// MaxInputBytes is the largest user message of a run.
	MaxInputBytes() int
	// SessionActive reports whether session sid's actor runs on this node.
	SessionActive(sid string) bool
}

// Defaults of Options.
const (
	DefaultOwner         = "tah"
	DefaultHeartbeat     = 30 * time.Second
	DefaultMaxConcurrent = 64
)

// Options configure a Gateway.
type Options struct {
	// Conn is the gateway's own connection, with a credential of the
	// agents role: it answers discovery, prompts and status requests and
	// publishes heartbeats, and NATS refuses it every subject of TAH's, so
	// that no reply subject a caller names can make it write one.
	Conn *nats.Conn
	// Host is the node.
	Host Host
	// Owner is the owner token of the default tenant's instances (metadata
	// owner): the deployment's name (wire.ValidAgentOwner). Empty means
	// DefaultOwner. A tenant's instances are owned by
	// wire.TenantAgentOwner(tenant).
	Owner string
	// Heartbeat is the heartbeat interval; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// MaxConcurrent bounds the prompts this node admits at once (parse,
	// session, stored input); one more gets 429. 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// Version is the service version (semver); empty means wire.APIVersion.
	Version string
	// MinSenderTrust is what a prompt requires of its sender (§13.9):
	// wire.AgentSenderTrustAny (empty: the default) or
	// wire.AgentSenderTrustSigned, a verified Agent-Sender header. It is
	// declared in the prompt endpoints' metadata.
	MinSenderTrust string
	// SenderName names a verified caller by its user NKEY: the name of the
	// credential issued for it, or "" when unknown (the NKEY is recorded
	// then). Nil: the NKEY always.
	SenderName func(user string) string
	// Node names this node in the instances' metadata.
	Node   string
	Logger *slog.Logger
}

// Gateway serves TAH's sessions as agents of the Synadia Agent Protocol for
// NATS (docs/agent-protocol.md) on one node: the controller instance
// ("new"), one per tenant (TenantActive) owned by wire.TenantAgentOwner,
// and an instance for each session whose actor runs on this node,
// registered when it starts and removed when it passivates.
type Gateway struct {
	opts Options
	log  *slog.Logger
	nc   *nats.Conn

	mu        sync.Mutex
	instances map[string]*instance // by key: <owner>.<name>
	pending   []activity           // session activity not yet applied
	closed    bool

	wake chan struct{}
	stop chan struct{}
	sem  chan struct{}
	wg   sync.WaitGroup
	// senders verifies signed Agent-Sender headers and remembers their
	// nonces within the replay window (one set per node: §13.7 allows it).
	senders *wire.SenderVerifier
}

type activity struct {
	sid    string
	active bool
	// check: apply only if the session is still active (the list at start).
	check bool
	// tenant, without sid: a tenant added (active) or removed, whose
	// controller is registered or removed.
	tenant string
}

// instance is one registered agent instance: a controller (session "") or
// a session's, of the default tenant or of tenant.
type instance struct {
	owner, name string
	session     string
	tenant      string
	svc         micro.Service
}

// key is the key of inst in Gateway.instances.
func (inst *instance) key() string { return inst.owner + "." + inst.name }

// Start registers the controller, then an instance for every session
// active on the node, and starts the heartbeats.
func Start(ctx context.Context, opts Options, active []string) (*Gateway, error) {
	if opts.Conn == nil || opts.Host == nil {
		return nil, errors.New("agents: a connection and a host are required")
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner
	}
	if err := wire.ValidAgentOwner(opts.Owner); err != nil {
		return nil, fmt.Errorf("agents: owner: %w", err)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.Version == "" {
		opts.Version = wire.APIVersion
	}
	switch opts.MinSenderTrust {
	case "":
		opts.MinSenderTrust = wire.AgentSenderTrustAny
	case wire.AgentSenderTrustAny, wire.AgentSenderTrustSigned:
	default:
		return nil, fmt.Errorf("agents: min_sender_trust %q: use %q or %q", opts.MinSenderTrust, wire.AgentSenderTrustAny, wire.AgentSenderTrustSigned)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{opts: opts, log: log, nc: opts.Conn, instances: map[string]*instance{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), sem: make(chan struct{}, opts.MaxConcurrent),
		senders: wire.NewSenderVerifier(0)}
	if err := g.register(&instance{owner: opts.Owner, name: wire.AgentController}); err != nil {
		return nil, err
	}
	for _, sid := range active {
		g.pending = append(g.pending, activity{sid: sid, active: true, check: true})
	}
	g.wg.Add(2)
	go g.apply()
	go g.heartbeats()
	g.signal()
	// The registrations reach the server before Start returns (a ctx
	// without a deadline gets one: the flush requires it).
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.nc.FlushWithContext(fctx); err != nil {
		g.Close()
		return nil, fmt.Errorf("agents: %w", err)
	}
	return g, nil
}

// SessionActive records that session sid's actor started or stopped on
// this node (session.Config.Active): its instance is registered or removed
// soon after, in order. It never blocks.
func (g *Gateway) SessionActive(sid string, active bool) { g.note(activity{sid: sid, active: active}) }

// TenantActive records that tenant was added (active) or removed: its
// controller, agents.prompt.tah.tenant-<tenant>.new, is registered or
// removed soon after, in order. Adding one twice is adding it once. It
// never blocks.
func (g *Gateway) TenantActive(tenant string, active bool) {
	if event.ValidTenant(tenant) != nil {
		return
	}
	g.note(activity{tenant: tenant, active: active})
}

func (g *Gateway) note(a activity) {
	g.mu.Lock()
	if !g.closed {
		g.pending = append(g.pending, a)
	}
	g.mu.Unlock()
	g.signal()
}

func (g *Gateway) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// apply registers and removes session instances as their sessions start
// and stop, until Close.
func (g *Gateway) apply() {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case <-g.wake:
		}
		g.mu.Lock()
		todo := g.pending
		g.pending = nil
		g.mu.Unlock()
		for _, a := range todo {
			inst := &instance{owner: wire.TenantAgentOwner(a.tenant), name: wire.AgentController, tenant: a.tenant}
			if a.sid != "" {
				inst = &instance{session: a.sid, tenant: event.TenantOf(a.sid)}
				inst.owner, inst.name = wire.AgentOf(g.opts.Owner, a.sid)
			}
			switch {
			case a.active && (!a.check || g.opts.Host.SessionActive(a.sid)):
				if err := g.register(inst); err != nil {
					g.log.Warn("agent instance not registered", "owner", inst.owner, "instance", inst.name, "err", err)
				}
			case !a.active:
				g.unregister(inst.key())
			}
		}
	}
}

// register adds inst: a controller (no session) or a session's instance.
func (g *Gateway) register(inst *instance) error {
	name := inst.name
	g.mu.Lock()
	_, exists := g.instances[inst.key()]
	g.mu.Unlock()
	if exists {
		return nil
	}
	label, desc := inst.session, "TAH durable agent session "+inst.session+": prompts continue it"
	if inst.session == "" {
		label, desc = wire.AgentController, "TAH durable agent sessions: a prompt starts a new session (or continues the one its \"session\" field names)"
		if inst.tenant != "" {
			desc = "TAH durable agent sessions of tenant " + inst.tenant + ": a prompt starts a new session of the tenant (or continues the one of its own its \"session\" field names)"
		}
	}
	svc, err := micro.AddService(g.nc, micro.Config{
		Name: wire.AgentsService, Version: g.opts.Version, Description: desc,
		Metadata: map[string]string{"agent": wire.AgentName, "owner": inst.owner, "session": label,
			"protocol_version": wire.AgentsProtocolVersion, "node": g.opts.Node},
	})
	if err != nil {
		return fmt.Errorf("agents: instance %s: %w", name, err)
	}
	inst.svc = svc
	maxPayload := formatSize(g.nc.MaxPayload())
	if err := svc.AddEndpoint(wire.AgentVerbPrompt, micro.HandlerFunc(func(r micro.Request) { g.prompt(inst, r) }),
		micro.WithEndpointSubject(wire.AgentSubject(wire.AgentVerbPrompt, inst.owner, name)),
		micro.WithEndpointQueueGroup(wire.AgentsQueueGroup),
		micro.WithEndpointMetadata(map[string]string{"max_payload": maxPayload, "attachments_ok": "true",
			wire.MetaMinSenderTrust: g.opts.MinSenderTrust})); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("agents: instance %s: %w", name, err)
	}
	if err := svc.AddEndpoint(wire.AgentVerbStatus, micro.HandlerFunc(func(r micro.Request) { g.status(inst, r) }),
		micro.WithEndpointSubject(wire.AgentSubject(wire.AgentVerbStatus, inst.owner, name)),
		micro.WithEndpointQueueGroup(wire.AgentsQueueGroup)); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("agents: instance %s: %w", name, err)
	}
	g.mu.Lock()
	g.instances[inst.key()] = inst
	g.mu.Unlock()
	g.beat(inst) // at once: callers see it without waiting a whole interval
	return nil
}

// unregister removes the instance of key (instance.key).
func (g *Gateway) unregister(key string) {
	g.mu.Lock()
	inst := g.instances[key]
	delete(g.instances, key)
	g.mu.Unlock()
	if inst != nil {
		if err := inst.svc.Stop(); err != nil {
			g.log.Debug("agent instance not stopped cleanly", "instance", key, "err", err)
		}
	}
}

// Instances is the number of instances registered (the controller's
// included).
func (g *Gateway) Instances() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.instances)
}

// heartbeat is the payload of inst's heartbeat and status replies.
func (g *Gateway) heartbeat(inst *instance) wire.AgentHeartbeat {
	label := inst.session
	if label == "" {
		label = wire.AgentController
	}
	return wire.AgentHeartbeat{Agent: wire.AgentName, Owner: inst.owner, Session: label, InstanceID: inst.svc.Info().ID,
		TS: time.Now().UTC().Format(time.RFC3339), IntervalS: max(1, int(g.opts.Heartbeat/time.Second))}
}

func (g *Gateway) beat(inst *instance) {
	if err := publishJSON(g.nc, wire.AgentSubject(wire.AgentVerbHeartbeat, inst.owner, inst.name), g.heartbeat(inst)); err != nil {
		g.log.Debug("heartbeat not published", "instance", inst.name, "err", err)
	}
}

// heartbeats publishes every instance's heartbeat each interval, until Close.
func (g *Gateway) heartbeats() {
	defer g.wg.Done()
	t := time.NewTicker(g.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		g.mu.Lock()
		insts := make([]*instance, 0, len(g.instances))
		for _, inst := range g.instances {
			insts = append(insts, inst)
		}
		g.mu.Unlock()
		for _, inst := range insts {
			g.beat(inst)
		}
	}
}

// status answers a status request with a heartbeat-shaped payload.
func (g *Gateway) status(inst *instance, r micro.Request) {
	if wire.CheckReplySubject(r.Reply()) != nil {
		return
	}
	// Classified so that a bad signature is seen, never refused: a
	// liveness probe does not depend on the prober's credentials (§13.9).
	if h := r.Headers().Get(wire.HeaderAgentSender); h != "" {
		if _, _, err := g.senders.Classify(h, r.Subject(), r.Data()); err != nil {
			g.log.Warn("agent status request: its Agent-Sender is refused; answered all the same", "instance", inst.name, "err", err)
		}
	}
	body, err := json.Marshal(g.heartbeat(inst))
	if err != nil {
		_ = r.Error("500", "the status cannot be encoded: "+err.Error(), nil)
		return
	}
	_ = r.Respond(body)
}

// Close removes every instance and stops the heartbeats; prompts being
// admitted finish first.
func (g *Gateway) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	g.wg.Wait()
	g.mu.Lock()
	keys := make([]string, 0, len(g.instances))
	for key := range g.instances {
		keys = append(keys, key)
	}
	g.mu.Unlock()
	for _, key := range keys {
		g.unregister(key)
	}
}

// fail ends the stream on reply with an error of status.
func (g *Gateway) fail(reply string, status int, e wire.AgentError) {
	if err := natsx.PublishAgentError(g.nc, reply, status, e); err != nil {
		g.log.Debug("agent error not published", "err", err)
	}
}
