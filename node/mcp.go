package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/tools/remote"
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

// MCPConfig is the MCP bridge as Start brings it up (Options.MCP, the
// setting tools.mcp_config): the servers' tools served as tool services on
// NATS, over a connection with a tool credential of its own, never the
// node's; the node offers them to the model as remote tools
// (Options.RemoteTools).
//
// The servers start in the background: none holds the node's start, and
// one that fails to start (a cold `npx -y` that runs out of its connect
// time, a command that fails its first starts) is started again with
// backoff for as long as the node runs, as one that dies later is. A turn
// that begins while a server is still connecting, within the wait of the
// remote tools (remote.Config.ServiceWait) of the node's start, waits for
// it before it asks the model, so that the model is offered its tools.
type MCPConfig struct {
	// Servers are the servers to serve (mcp.LoadConfig).
	Servers mcp.Config
	// Bridge configures the bridge: the version told to the servers, the
	// protected paths, the tools' timeout, the backoff. Its Logger defaults
	// to the node's.
	Bridge mcp.Options
	// DataDir holds the credential, <DataDir>/mcp.creds: issued there from
	// the embedded server's trust material at every start (the servers may
	// have changed), or put there by the operator when External.
	DataDir  string
	External bool
	// TLSCA is the CA the connection verifies the server against.
	TLSCA string
}

// mcpConfig is tools.mcp_config as Configure turns it into the bridge's
// configuration (nil when it is not set).
func mcpConfig(cfgFile, dataDir, root string, deny []string, toolTimeout time.Duration, external bool, tlsCA string) (*MCPConfig, error) {
	if cfgFile == "" {
		return nil, nil
	}
	servers, err := mcp.LoadConfig(cfgFile)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	mc := &MCPConfig{Servers: servers, DataDir: dataDir, External: external, TLSCA: tlsCA}
	// The built-in tools' protections hold for the MCP servers' tools too:
	// no call names the data directory, a credential file or a denied path.
	mc.Bridge.Version = wire.ProtocolString
	mc.Bridge.Protect = mcp.Protect{Root: root, DataDir: dataDir, Deny: deny}
	mc.Bridge.Service.Executor.Timeout = toolTimeout
	return mc, nil
}

// mcpPart is the running bridge of Options.MCP.
type mcpPart struct {
	bridge *mcp.Bridge
	// started is when the bridge started, and wait the remote tools'
	// ServiceWait: until started+wait, a turn waits for the servers still
	// connecting (awaitMCP).
	started time.Time
	wait    time.Duration
}

// startMCP starts the bridge of mc, when set, and returns loop wrapped so
// that a turn waits for the servers still connecting (mcpLoop). The bridge
// starts its servers in the background, so that it never holds the node's
// start; a bridge that cannot start at all (its credential, its
// connection) leaves the node running without it: the log says why, and
// so does MCPErr.
func (n *Node) startMCP(ctx context.Context, mc *MCPConfig, loop session.Loop) session.Loop {
	if mc == nil {
		return loop
	}
	if err := n.runMCP(ctx, *mc); err != nil {
		n.mcpErr = err
		n.log.Error("the MCP servers' tools are not served", "err", err)
		return loop
	}
	if loop == nil {
		loop = session.DefaultLoop{}
	}
	return mcpLoop{inner: loop, n: n}
}

func (n *Node) runMCP(ctx context.Context, mc MCPConfig) error {
	if len(mc.Servers.Servers) == 0 {
		return errors.New("no MCP server configured")
	}
	opts := mc.Bridge
	if opts.Logger == nil {
		opts.Logger = n.log.With("component", "mcp")
	}
	grants := mc.Servers.ToolGrants()
	if len(grants) == 0 {
		return errors.New("every MCP server of the configuration is disabled")
	}
	creds, err := mcpCreds(mc, grants)
	if err != nil {
		return err
	}
	nopts := append([]nats.Option{nats.UserCredentials(creds), nats.Name("tah-node " + n.ID() + " mcp"),
		nats.CustomInboxPrefix(wire.CredentialInbox(mcpName)), nats.MaxReconnects(-1)},
		natsx.TLSOptions(mc.TLSCA, "", "")...)
	nc, err := nats.Connect(LocalURL(n.bus.ClientURL()), nopts...)
	if err != nil {
		if fi, serr := os.Stat(creds); serr == nil && fi.Size() > mcpCredsLarge {
			return fmt.Errorf("connect with %s, of %d bytes for %d servers (a NATS server takes a credential in its first protocol line, 16 KiB on an embedded one: configure fewer servers, or shorter names): %w",
				creds, fi.Size(), len(grants), err)
		}
		return fmt.Errorf("connect with %s: %w", creds, err)
	}
	if obs := n.bus.Artifacts(); obs != nil && opts.Service.Executor.Artifacts == nil {
		opts.Service.Executor.Artifacts = artifacts.New(obs)
	}
	b := mcp.New(mc.Servers, opts)
	wait := remote.DefaultServiceWait
	if n.remote != nil {
		wait = n.remote.ServiceWait()
	} else {
		n.log.Warn("the MCP servers' tools are served on NATS, but this node does not offer remote tools (tools.remote): its model is not offered them")
	}
	n.mcp = &mcpPart{bridge: b, started: time.Now(), wait: wait}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { // owned by the node: its closer stops it and waits
		defer close(done)
		b.Serve(sctx, nc, nil)
	}()
	// Closed after the session actors (closers run in reverse): calls in
	// flight get the bridge's grace, then the servers stop.
	n.closers = append(n.closers, func(context.Context) error {
		stop()
		<-done
		nc.Close()
		return nil
	})
	n.log.Info("MCP servers starting in the background", "servers", b.Servers())
	return nil
}

// MCPErr is why the bridge of Options.MCP does not run; nil when it runs,
// or when none was asked for.
func (n *Node) MCPErr() error { return n.mcpErr }

// MCPServers are the MCP servers of Options.MCP and where each stands
// (connecting until first served, serving, restarting), sorted by name;
// nil without a running bridge.
func (n *Node) MCPServers() []wire.MCPServer {
	if n.mcp == nil {
		return nil
	}
	states, _ := n.mcp.bridge.States()
	out := make([]wire.MCPServer, 0, len(states))
	for name, st := range states {
		out = append(out, wire.MCPServer{Name: name, State: st.State, Tools: st.Tools, Failures: st.Failures, Error: st.Err})
	}
	slices.SortFunc(out, func(a, b wire.MCPServer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// mcpLoop is a session loop that, before a turn runs, waits for the MCP
// servers still connecting (awaitMCP).
type mcpLoop struct {
	inner session.Loop
	n     *Node
}

func (l mcpLoop) Run(ctx context.Context, a *session.AgentContext) error {
	l.n.awaitMCP(ctx, a.Session)
	return l.inner.Run(ctx, a) // a cancel meanwhile ends the turn there
}

// awaitMCP waits, while the node is younger than the remote tools' wait,
// for the MCP servers that have not been served since it started (a cold
// `npx -y` fetching its package), and then for the node's registry to list
// their tools, so that the turn's request offers them: a turn started a
// moment after the node's ready does not find them missing. It returns at
// once when no server connects, and at the end of the wait (the turn then
// runs without the tools of the servers still connecting), or when ctx is
// done.
func (n *Node) awaitMCP(ctx context.Context, sid string) {
	m := n.mcp
	if m == nil {
		return
	}
	until := m.started.Add(m.wait)
	if !time.Now().Before(until) {
		return
	}
	states, _ := m.bridge.States()
	var connecting []string
	for name, st := range states {
		if st.State == mcp.StateConnecting {
			connecting = append(connecting, name)
		}
	}
	if len(connecting) == 0 {
		return
	}
	slices.Sort(connecting)
	n.log.Info("a turn waits for the MCP servers still connecting", "session", sid, "servers", connecting, "until", until)
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if err := n.waitMCP(wctx, connecting); err != nil && ctx.Err() == nil {
		n.log.Warn("MCP servers still connecting: the turn goes on without their tools", "session", sid, "err", err)
	}
}

// WaitMCP returns nil once every MCP server of Options.MCP has been served
// since the node started and the node lists its tools (a server that
// restarted since counts as served), or ctx's error; nil at once without
// MCP servers. A program that wants their tools offered from its first
// turn waits for it; the node's turns wait for the servers still
// connecting by themselves, for a while (MCPConfig).
func (n *Node) WaitMCP(ctx context.Context) error {
	if n.mcp == nil {
		return nil
	}
	return n.waitMCP(ctx, n.mcp.bridge.Servers())
}

// waitMCP waits until none of servers is connecting, then for the node's
// registry to list a tool of each that serves one.
func (n *Node) waitMCP(ctx context.Context, servers []string) error {
	b := n.mcp.bridge
	states, changed := b.States()
	for slices.ContainsFunc(servers, func(name string) bool { return states[name].State == mcp.StateConnecting }) {
		select {
		case <-changed:
			states, changed = b.States()
		case <-ctx.Done():
			var still []string
			for _, name := range servers {
				if st := states[name]; st.State == mcp.StateConnecting {
					still = append(still, fmt.Sprintf("%s (%d failed attempts: %s)", name, st.Failures, st.Err))
				}
			}
			return fmt.Errorf("MCP servers still connecting: %s: %w", strings.Join(still, ", "), ctx.Err())
		}
	}
	if n.remote == nil {
		return nil
	}
	// The bridge serves a server's tools before the node's registry lists
	// them: one discovery that starts once they are served finds them all.
	for _, name := range servers {
		if tools := states[name].Tools; len(tools) > 0 {
			if err := n.remote.WaitFor(ctx, tools[0]); err != nil {
				return fmt.Errorf("the tools of MCP server %s not listed: %w", name, err)
			}
		}
	}
	return nil
}

// mcpCreds is the bridge's credential, <data>/mcp.creds, of the tool role
// with grants, the namespaces of the configured servers ("fs__*": every
// tool of the server fs, whatever it lists, now or later; its size does not
// grow with the tools): issued afresh at every start for an embedded server
// (the servers may have changed); put there by the operator for an external
// NATS, and checked.
func mcpCreds(mc MCPConfig, grants []string) (string, error) {
	path := filepath.Join(mc.DataDir, mcpCredsFile)
	if mc.External {
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
	t, err := auth.Load(mc.DataDir)
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
