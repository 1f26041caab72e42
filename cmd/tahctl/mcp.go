package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/wire"
)

const mcpHelp = `Serves the tools of the MCP servers in FILE (the {"mcpServers": {...}} file of
Claude Desktop, Claude Code or Cursor) as TAH tool services named
<server>__<tool>, until Ctrl-C. It needs a tool credential that grants each
server's tools, <server>__*: on the node's machine,
tahctl creds add --role tool --tool 'fs__*,api__*' NAME (it writes
.tah/creds/NAME.creds), then tahctl mcp serve --creds .tah/creds/NAME.creds
FILE. Tools a server adds later are served with the same credential. A
server that crashes is restarted; its tools are withdrawn while it is down.`

// runMCP is `tahctl mcp serve FILE`.
func runMCP(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("mcp", "serve FILE", mcpHelp)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "serve" {
		return usageError("`tahctl mcp serve FILE`", "mcp: the subcommand is serve, with the MCP configuration file")
	}
	cfg, err := mcp.LoadConfig(pos[1])
	if err != nil {
		return usageError(`write {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}}}`, "%v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(g.stderr, nil))
	b, err := mcp.Open(ctx, cfg, mcp.Options{Logger: log, Version: wire.ProtocolString})
	if err != nil {
		return errorf(exitInterrupted, "", "interrupted while the MCP servers started")
	}
	defer b.Close()
	for _, p := range b.Problems() {
		fmt.Fprintln(g.stderr, "! "+p)
	}
	names := b.Names()
	if len(names) == 0 {
		return errorf(exitFailed, "fix the servers above (their stderr is in the log), then run tahctl mcp serve again", "no MCP server offered a tool to serve")
	}
	ep := g.resolve()
	if err := checkToolCreds(ep.creds, cfg.ToolGrants()); err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	store := mcpArtifacts(ctx, ep.creds, c.Conn(), log)
	fmt.Fprintf(g.stdout, "serving %d tools of MCP servers on %s (Ctrl-C stops):\n  %s\n", len(names), ep.url, strings.Join(names, "\n  "))
	b.Serve(ctx, c.Conn(), store)
	fmt.Fprintln(g.stdout, "stopped")
	return nil
}

// checkToolCreds fails, saying which command makes the right one, when the
// credential at path does not grant every namespace of grants (<server>__*:
// every tool of that server, wire.ToolNamespaceGrant).
func checkToolCreds(path string, grants []string) error {
	var pub, sub []string
	for _, g := range grants {
		ns, _ := wire.ToolNamespaceOfGrant(g)
		pub = append(pub, wire.NamespaceResultSubjects(ns))
		sub = append(sub, wire.NamespaceToolSubjects(ns), "$SRV.INFO."+wire.ToolNamespaceService(ns))
	}
	try := fmt.Sprintf("on the node's machine: tahctl creds add --role tool --tool '%s' mcp, then tahctl mcp serve --creds .tah/creds/mcp.creds FILE (creds add prints where it wrote it)", strings.Join(grants, ","))
	if path == "" {
		return usageError(try, "mcp serve needs a tool credential that grants the servers' tools")
	}
	denied, err := auth.Denied(path, pub, sub)
	if err != nil {
		return usageError(try, "the credential %s: %v", path, err)
	}
	if len(denied) > 0 {
		return usageError(try, "the credential %s may not serve these servers' tools (%s)", path, strings.Join(denied, ", "))
	}
	return nil
}

// mcpArtifacts is the object store where binary content goes, when the
// credential may write it (a tool credential may not: the content is then
// described to the model without a copy).
func mcpArtifacts(ctx context.Context, creds string, nc *nats.Conn, log *slog.Logger) tools.ArtifactStore {
	denied, err := auth.Denied(creds, []string{"$O." + wire.ArtifactBucket + ".C.x"}, nil)
	if err != nil || len(denied) > 0 {
		log.Info("binary content of the tools' results is described, not kept: the credential may not write the artifact store")
		return nil
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var s *artifacts.Store
		if s, err = artifacts.Open(ctx, js); err == nil {
			return s
		}
	}
	log.Warn("binary content of the tools' results is described, not kept", "err", err)
	return nil
}
