package nodecmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

// agentsName is the name of the agent gateway's credential (and its file,
// <data>/agents.creds).
const agentsName = "agents"

// StartAgents serves the node's sessions as agents of the Synadia Agent
// Protocol on a connection of the gateway's own, with a credential of the
// agents role (issued here for an embedded server; put there by the
// operator for an external NATS). A gateway that cannot start leaves the
// node running, and says why. It returns what closes its connection, and
// the banner's line about it.
func StartAgents(ctx context.Context, cfg config.Config, n *node.Node, natsURL string, log *slog.Logger) (closeConn func(), line string) {
	if !cfg.Agents.Enabled {
		return func() {}, "off (--agents=false)"
	}
	nc, err := connectAgents(cfg, natsURL)
	if err == nil {
		err = n.StartAgents(ctx, node.AgentsOptions{Conn: nc, Owner: cfg.Agents.Owner, Heartbeat: time.Duration(cfg.Agents.Heartbeat)})
		if err != nil {
			nc.Close()
		}
	}
	if err != nil {
		log.Warn("the agent protocol is off", "err", err)
		return func() {}, "off: " + err.Error()
	}
	prompt := wire.AgentSubject(wire.AgentVerbPrompt, cfg.Agents.Owner, wire.AgentController)
	log.Info("sessions served as agents", "prompt", prompt, "discover", "$SRV.INFO."+wire.AgentsService)
	return nc.Close, prompt + " (the Synadia Agent Protocol " + wire.AgentsProtocolVersion + ": docs/agent-protocol.md)"
}

func connectAgents(cfg config.Config, natsURL string) (*nats.Conn, error) {
	path := filepath.Join(cfg.DataDir, agentsName+".creds")
	if cfg.NATS.URL == "" {
		t, err := auth.Load(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
		if err := t.EnsureCreds(path, wire.RoleAgents, agentsName); err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("with an external NATS, put a credential of the agents role named %q at %s (docs/agent-protocol.md, \"Running it\")", agentsName, path)
	}
	opts := append([]nats.Option{nats.UserCredentials(path), nats.Name("tah-node " + cfg.NodeID + " agents"),
		nats.CustomInboxPrefix(wire.CredentialInbox(agentsName)), nats.MaxReconnects(-1)},
		natsx.TLSOptions(cfg.NATS.TLSCA, "", "")...)
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect with %s: %w", path, err)
	}
	return nc, nil
}
