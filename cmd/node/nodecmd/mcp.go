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
	// mcpCredsLarge is the size of a credential file near the embedded
	// server's longest first line (16 KiB, the JWT in it): a connect that
	// fails with one says so. Each server's namespace costs some 300 bytes
	// (more with a long name).
	mcpCredsLarge = 14 << 10
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
	if obs := n.Bus().Artifacts(); obs != nil {
		store = artifacts.New(obs)
	}
	m, err := startMCP(ctx, cfg, localURL(n.Bus().ClientURL()), store, log)
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
	// The built-in tools' protections hold for the MCP servers' tools too:
	// no call names the data directory, a credential file or a denied path.
	b, err := mcp.Open(ctx, mc, mcp.Options{Logger: log, Version: wire.ProtocolString,
		Protect: mcp.Protect{Root: cfg.Tools.Root, DataDir: cfg.DataDir, Deny: cfg.Tools.Deny},
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
	creds, err := mcpCreds(cfg, mc.ToolGrants())
	if err != nil {
		b.Close()
		return nil, err
	}
	c, err := client.Connect(ctx, client.Options{URL: natsURL, CredsFile: creds, TLSCAFile: cfg.NATS.TLSCA, Name: "tah-node " + cfg.NodeID + " mcp"})
	if err != nil {
		b.Close()
		if fi, serr := os.Stat(creds); serr == nil && fi.Size() > mcpCredsLarge {
			return nil, fmt.Errorf("connect with %s, of %d bytes for %d servers (a NATS server takes a credential in its first protocol line, 16 KiB on an embedded one: configure fewer servers, or shorter names): %w",
				creds, fi.Size(), len(mc.ToolGrants()), err)
		}
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
// with grants, the namespaces of the configured servers ("fs__*": every
// tool of the server fs, whatever it lists, now or later; its size does not
// grow with the tools): issued afresh at every start for an embedded server
// (the servers may have changed); put there by the operator for an external
// NATS, and checked.
func mcpCreds(cfg config.Config, grants []string) (string, error) {
	path := filepath.Join(cfg.DataDir, mcpCredsFile)
	if cfg.NATS.URL != "" {
		try := fmt.Sprintf("tahctl creds nsc --role tool --tool '%s' %s prints the nsc command that makes it", strings.Join(grants, ","), mcpName)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("with an external NATS, put a credential of the tool role named %q for the tools %s at %s: %s (docs/operations.md, \"MCP servers\")",
				mcpName, strings.Join(grants, ","), path, try)
		}
		var pub, sub []string
		for _, g := range grants {
			ns, _ := wire.ToolNamespaceOfGrant(g)
			pub = append(pub, wire.NamespaceResultSubjects(ns))
			sub = append(sub, wire.NamespaceToolSubjects(ns), "$SRV.INFO."+wire.ToolNamespaceService(ns))
		}
		denied, err := auth.Denied(path, pub, sub)
		if err != nil {
			return "", fmt.Errorf("its credential %s: %w", path, err)
		}
		if len(denied) > 0 {
			return "", fmt.Errorf("its credential %s may not serve every server's tools (%s): issue one for the tools %s: %s",
				path, strings.Join(denied, ", "), strings.Join(grants, ","), try)
		}
		return path, nil
	}
	t, err := auth.Load(cfg.DataDir)
	if err != nil {
		return "", fmt.Errorf("its credential: %w", err)
	}
	u, err := auth.RoleUser(wire.RoleTool, mcpName, grants)
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
