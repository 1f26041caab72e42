package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/agents"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/quota"
	"github.com/tah-dev/tah/wire"
)

// agentsName is the name of the agent gateway's credential (and its file,
// <data>/agents.creds).
const agentsName = "agents"

// GatewayConfig is the agent gateway as Start brings it up (Options.Agents):
// on a connection of its own, with a credential of the agents role.
type GatewayConfig struct {
	Owner     string
	Heartbeat time.Duration
	// MinSenderTrust: see agents.Options.
	MinSenderTrust string
	// DataDir holds the credential, <DataDir>/agents.creds: issued there
	// from the embedded server's trust material, or put there by the
	// operator when External.
	DataDir  string
	External bool
	// TLSCA is the CA the connection verifies the server against.
	TLSCA string
}

// startGateway serves the node's sessions as agents (Options.Agents). A
// gateway that cannot start leaves the node running: the error is logged
// and kept (GatewayErr).
func (n *Node) startGateway(ctx context.Context, gc GatewayConfig) {
	nc, err := n.connectGateway(gc)
	if err == nil {
		err = n.StartAgents(ctx, AgentsOptions{Conn: nc, Owner: gc.Owner, Heartbeat: gc.Heartbeat, MinSenderTrust: gc.MinSenderTrust})
		if err != nil {
			nc.Close()
		} else {
			// After the gateway, closed before it (closers run in reverse).
			n.closers = append(n.closers, func(context.Context) error { nc.Close(); return nil })
		}
	}
	if err != nil {
		n.gatewayErr = err
		n.log.Warn("the agent protocol is off", "err", err)
		return
	}
	prompt := wire.AgentSubject(wire.AgentVerbPrompt, gc.Owner, wire.AgentController)
	n.log.Info("sessions served as agents", "prompt", prompt, "discover", "$SRV.INFO."+wire.AgentsService)
}

// GatewayErr is why the gateway of Options.Agents did not start; nil when
// it runs, or when none was asked for.
func (n *Node) GatewayErr() error { return n.gatewayErr }

func (n *Node) connectGateway(gc GatewayConfig) (*nats.Conn, error) {
	path := filepath.Join(gc.DataDir, agentsName+".creds")
	if !gc.External {
		t, err := auth.Load(gc.DataDir)
		if err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
		if err := t.EnsureCreds(path, wire.RoleAgents, agentsName); err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("with an external NATS, put a credential of the agents role named %q at %s (docs/agent-protocol.md, \"Running it\")", agentsName, path)
	}
	opts := append([]nats.Option{nats.UserCredentials(path), nats.Name("tah-node " + n.ID() + " agents"),
		nats.CustomInboxPrefix(wire.CredentialInbox(agentsName)), nats.MaxReconnects(-1)},
		natsx.TLSOptions(gc.TLSCA, "", "")...)
	url := LocalURL(n.bus.ClientURL())
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect with %s: %w", path, err)
	}
	return nc, nil
}

// LocalURL is url (or host:port) with an unspecified host (0.0.0.0, ::), on
// which a server listens on every interface, replaced by 127.0.0.1: where a
// local client connects.
func LocalURL(url string) string {
	for _, host := range []string{"0.0.0.0", "[::]"} {
		if i := strings.Index(url, host+":"); i >= 0 {
			return url[:i] + "127.0.0.1" + url[i+len(host):]
		}
	}
	return url
}

// AgentsOptions configure the node's agent protocol gateway (StartAgents).
type AgentsOptions struct {
	// Conn is the gateway's own connection: a credential of the agents role
	// (wire.RoleAgents), never the node's.
	Conn      *nats.Conn
	Owner     string
	Heartbeat time.Duration
	// MaxConcurrent, MinSenderTrust: see agents.Options.
	MaxConcurrent  int
	MinSenderTrust string
}

// senderName is the name of the credential issued for the user NKEY user,
// from the cluster's registry (wire.CredsBucket), or "" when it is not
// there: a cluster whose operator issues users with nsc has none, and a
// verified caller is then recorded by its NKEY.
func (n *Node) senderName(user string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := n.bus.JetStream().KeyValue(ctx, wire.CredsBucket)
	if err != nil {
		return ""
	}
	e, err := kv.Get(ctx, user)
	if err != nil {
		return ""
	}
	var c wire.Credential
	if json.Unmarshal(e.Value(), &c) != nil || c.PublicKey != user {
		return ""
	}
	return c.Name
}

// StartAgents serves this node's sessions as agents of the Synadia Agent
// Protocol for NATS (package agents) on opts.Conn, until the node closes.
// The turns themselves are streamed by whichever node works on them, with
// or without a gateway.
func (n *Node) StartAgents(ctx context.Context, opts AgentsOptions) error {
	g, err := agents.Start(ctx, agents.Options{Conn: opts.Conn, Host: agentHost{n}, Owner: opts.Owner, Heartbeat: opts.Heartbeat,
		MaxConcurrent: opts.MaxConcurrent, MinSenderTrust: opts.MinSenderTrust, SenderName: n.senderName,
		Node: n.ID(), Logger: n.log.With("component", "agents")}, n.sessions.ActiveSessions())
	if err != nil {
		return err
	}
	// The tenants seen before it is stored, told here; those seen after,
	// by tenantSeen (which reads it under the same lock).
	n.tenantsMu.Lock()
	if !n.gateway.CompareAndSwap(nil, g) {
		n.tenantsMu.Unlock()
		g.Close()
		return errors.New("node: the agent gateway runs already")
	}
	for t := range n.tenants {
		g.TenantActive(t, true)
	}
	n.tenantsMu.Unlock()
	// Closed first (closers run in reverse): no instance outlives its node.
	n.closers = append(n.closers, func(context.Context) error { n.gateway.Store(nil); g.Close(); return nil })
	return nil
}

// Gateway is the node's agent protocol gateway, nil when it serves none.
func (n *Node) Gateway() *agents.Gateway { return n.gateway.Load() }

// tenantSeen records that the registry has tenant (present) or no longer
// has it, and tells the gateway, if any, which serves a controller per
// tenant (quota.StartWith's onTenant). It never blocks.
func (n *Node) tenantSeen(tenant string, present bool) {
	n.tenantsMu.Lock()
	defer n.tenantsMu.Unlock()
	if n.tenants == nil {
		n.tenants = map[string]bool{}
	}
	if present {
		n.tenants[tenant] = true
	} else {
		delete(n.tenants, tenant)
	}
	if g := n.gateway.Load(); g != nil {
		g.TenantActive(tenant, present)
	}
}

// sessionActive tells the gateway, if any, that a session's actor started
// or stopped (session.Config.Active).
func (n *Node) sessionActive(sid string, active bool) {
	if g := n.gateway.Load(); g != nil {
		g.SessionActive(sid, active)
	}
}

// agentHost is the node as the gateway uses it.
type agentHost struct{ n *Node }

// CreateSession: over the tenant's sessions quota, an error wrapping
// agents.ErrQuotaExceeded.
func (h agentHost) CreateSession(ctx context.Context, tenant string) (string, error) {
	rep, err := h.n.apiCreate(ctx, wire.CreateRequest{Tenant: tenant})
	if qe := (*quota.ExceededError)(nil); errors.As(err, &qe) {
		return "", fmt.Errorf("%w: %w", err, agents.ErrQuotaExceeded)
	}
	return rep.Session, err
}

// CheckSession: a session id that is not valid names no session either.
func (h agentHost) CheckSession(ctx context.Context, sid string) error {
	err := h.n.needSession(ctx, sid)
	if err == nil {
		return nil
	}
	var ae *apiError
	if notFound := errors.As(err, &ae) && ae.code == wire.APIErrNotFound; notFound || wire.ValidSessionID(sid) != nil {
		return fmt.Errorf("%w: %w", err, agents.ErrNoSession)
	}
	return err
}

func (h agentHost) PublishInput(ctx context.Context, sid string, in wire.Input) (string, error) {
	return h.n.bus.PublishInput(ctx, sid, in)
}

func (h agentHost) MaxInputBytes() int            { return h.n.maxInputBytes() }
func (h agentHost) SessionActive(sid string) bool { return h.n.sessions.IsActive(sid) }
