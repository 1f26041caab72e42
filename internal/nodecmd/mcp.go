package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// mcpName is the name of the MCP bridge's credential (its inbox is
// _INBOX_mcp.), and mcpCredsFile its file in the data directory.
const (
	mcpName      = "mcp"
	mcpCredsFile = "mcp.creds"
)

// mcpBridge is the MCP bridge as the node runs it (tools.mcp_config): the
// servers' tools served as tool services over a connection with a tool
// credential of its own, never the node's.
type mcpBridge struct {
	names []string
	c     *client.Client
	stop  context.CancelFunc
	done  chan struct{}
}

// nodeMCP starts the bridge when tools.mcp_config is set: nil when it is
// not, or when the bridge could not start (the log says why).
func nodeMCP(ctx context.Context, cfg config.Config, n *node.Node, log *slog.Logger) *mcpBridge {
	if cfg.Tools.MCPConfig == "" {
		return nil
	}
	var store tools.ArtifactStore
	if obs := n.Bus.Artifacts(); obs != nil {
		store = artifacts.New(obs)
	}
	m, err := startMCP(ctx, cfg, localURL(n.Bus.ClientURL()), store, log)
	if err != nil {
		log.Error("the MCP servers' tools are not served", "config", cfg.Tools.MCPConfig, "err", err)
	}
	return m
}

// banner names the tools served, under the node's banner.
func (m *mcpBridge) banner(w io.Writer) {
	if m != nil {
		fmt.Fprintf(w, "MCP tools:  %s\n", strings.Join(m.names, ", "))
	}
}

// startMCP starts the servers of cfg.Tools.MCPConfig and serves their tools
// until close. A bridge that cannot start leaves the node running: the error
// says why, and the node's log has each server's own.
func startMCP(ctx context.Context, cfg config.Config, natsURL string, store tools.ArtifactStore, log *slog.Logger) (*mcpBridge, error) {
	mc, err := mcp.LoadConfig(cfg.Tools.MCPConfig)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "mcp")
	b, err := mcp.Open(ctx, mc, mcp.Options{Logger: log, Version: wire.ProtocolString,
		Service: toolservice.Config{Executor: tools.Options{Timeout: time.Duration(cfg.Tools.Timeout)}}})
	if err != nil {
		return nil, err
	}
	for _, p := range b.Problems() {
		log.Warn("mcp: " + p)
	}
	names := b.Names()
	if len(names) == 0 {
		b.Close()
		return nil, errors.New("no MCP server offered a tool to serve (the log says why)")
	}
	creds, err := mcpCreds(cfg, names)
	if err != nil {
		b.Close()
		return nil, err
	}
	c, err := client.Connect(ctx, client.Options{URL: natsURL, CredsFile: creds, TLSCAFile: cfg.NATS.TLSCA, Name: "tah-node " + cfg.NodeID + " mcp"})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connect with %s: %w", creds, err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m := &mcpBridge{names: names, c: c, stop: stop, done: make(chan struct{})}
	go func() { // owned by m: close stops it and waits
		defer close(m.done)
		b.Serve(sctx, c.Conn(), store)
	}()
	return m, nil
}

// mcpCreds is the bridge's credential, <data>/mcp.creds, of the tool role
// for names: issued afresh at every start for an embedded server (the
// servers' tools may have changed); put there by the operator for an
// external NATS, and checked.
func mcpCreds(cfg config.Config, names []string) (string, error) {
	path := filepath.Join(cfg.DataDir, mcpCredsFile)
	if cfg.NATS.URL != "" {
		subs := make([]string, len(names))
		for i, n := range names {
			subs[i] = wire.ToolSubject(n)
		}
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("with an external NATS, put a credential of the tool role named %q for the tools %s at %s (docs/operations.md, \"MCP servers\")",
				mcpName, strings.Join(names, ","), path)
		}
		denied, err := auth.Denied(path, nil, subs)
		if err != nil {
			return "", fmt.Errorf("its credential %s: %w", path, err)
		}
		if len(denied) > 0 {
			return "", fmt.Errorf("its credential %s may not serve every tool (%s): issue one for the tools %s", path, strings.Join(denied, ", "), strings.Join(names, ","))
		}
		return path, nil
	}
	t, err := auth.Load(cfg.DataDir)
	if err != nil {
		return "", fmt.Errorf("its credential: %w", err)
	}
	u, err := auth.RoleUser(wire.RoleTool, mcpName, names)
	if err != nil {
		return "", fmt.Errorf("its credential: %w", err)
	}
	issued, err := t.Issue(u)
	if err != nil {
		return "", fmt.Errorf("its credential: %w", err)
	}
	if err := localnode.WriteAtomic(path, issued.Creds, 0o600); err != nil {
		return "", fmt.Errorf("its credential: %w", err)
	}
	return path, nil
}

// close stops serving (calls in flight get the bridge's grace), stops the
// servers and closes the bridge's connection.
func (m *mcpBridge) close() {
	if m == nil {
		return
	}
	m.stop()
	<-m.done
	m.c.Close()
}
