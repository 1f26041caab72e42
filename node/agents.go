package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/agents"
	"github.com/tah-dev/tah/wire"
)

// AgentsOptions configure the node's agent protocol gateway (StartAgents).
type AgentsOptions struct {
	// Conn is the gateway's own connection: a credential of the agents role
	// (wire.RoleAgents), never the node's.
	Conn      *nats.Conn
	Owner     string
	Heartbeat time.Duration
	// MaxConcurrent: see agents.Options.
	MaxConcurrent int
}

// StartAgents serves this node's sessions as agents of the Synadia Agent
// Protocol for NATS (package agents) on opts.Conn, until the node closes.
// The turns themselves are streamed by whichever node works on them, with
// or without a gateway.
func (n *Node) StartAgents(ctx context.Context, opts AgentsOptions) error {
	g, err := agents.Start(ctx, agents.Options{Conn: opts.Conn, Host: agentHost{n}, Owner: opts.Owner, Heartbeat: opts.Heartbeat,
		MaxConcurrent: opts.MaxConcurrent, Node: n.ID(), Logger: n.log.With("component", "agents")}, n.Sessions.ActiveSessions())
	if err != nil {
		return err
	}
	if !n.gateway.CompareAndSwap(nil, g) {
		g.Close()
		return errors.New("node: the agent gateway runs already")
	}
	// Closed first (closers run in reverse): no instance outlives its node.
	n.closers = append(n.closers, func(context.Context) error { n.gateway.Store(nil); g.Close(); return nil })
	return nil
}

// Gateway is the node's agent protocol gateway, nil when it serves none.
func (n *Node) Gateway() *agents.Gateway { return n.gateway.Load() }

// sessionActive tells the gateway, if any, that a session's actor started
// or stopped (session.Config.Active).
func (n *Node) sessionActive(sid string, active bool) {
	if g := n.gateway.Load(); g != nil {
		g.SessionActive(sid, active)
	}
}

// agentHost is the node as the gateway uses it.
type agentHost struct{ n *Node }

func (h agentHost) CreateSession(ctx context.Context) (string, error) {
	rep, err := h.n.apiCreate(ctx, wire.CreateRequest{})
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
	return h.n.Bus.PublishInput(ctx, sid, in)
}

func (h agentHost) MaxInputBytes() int            { return h.n.maxInputBytes() }
func (h agentHost) SessionActive(sid string) bool { return h.n.Sessions.IsActive(sid) }
