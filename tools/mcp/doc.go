// Package mcp serves the tools of MCP (Model Context Protocol) servers as TAH
// tool services on NATS: the bridge behind `tahctl mcp serve FILE` and
// `tah-node --mcp-config FILE`.
//
// The configuration is the file users already have for Claude Desktop, Claude
// Code or Cursor: {"mcpServers": {"fs": {"command": "npx", "args": [...],
// "env": {...}}, "api": {"url": "https://host/mcp", "headers": {...}}}}, a
// command run over stdio or a Streamable HTTP endpoint. The bridge starts
// every server with the official Go SDK, lists its tools and offers each as
// the tool <server>__<tool> (characters outside [A-Za-z0-9_-] become '_'; a
// name over 64 characters, two tools of one name, or a malformed input
// schema: that tool is skipped and the reason is in Problems), through
// package toolservice: one micro service per tool, the result ledger, and a
// cancel that reaches the server as notifications/cancelled. A server's
// tools are its name's namespace (wire.ToolNamespaceGrant): services
// tah-tools-<server>, endpoints tah.tool.<server>.<tool>, so that the
// bridge's tool credential grants "<server>__*" for each server
// (Config.ToolGrants), whatever tools the servers list, now or later, and
// its size does not grow with them.
//
// Results keep the server's text and structured content; isError makes a
// failed result (code tool_error); images, audio and binary resources are
// stored as artifacts through the tool service's store (Serve's store) and
// described to the model in text. A server that exits or stops
// answering its pings is restarted with backoff; its tools are withdrawn
// while it is down, and a call in flight gets a failed result with code
// interrupted (its outcome is unknown). When a server says its tools changed
// (notifications/tools/list_changed), they are listed again and the new list
// is served in place: tools added are served, removed ones withdrawn, the
// others stay, without a restart. A stdio server inherits only the
// variables a program needs to start (PATH, HOME, ...), never the node's
// secrets, plus its own "env"; its stderr is logged a line a record, within
// bounds (stderrLimits: a line's length, a rate per server, a total per run
// of the server), and always read, so that a server that floods it neither
// floods the log nor blocks.
//
// The smallest use:
//
//	cfg, err := mcp.LoadConfig("mcp.json")
//	b, err := mcp.Open(ctx, cfg, mcp.Options{})
//	fmt.Println(b.Names(), b.Problems()) // what it will serve, what it will not
//	b.Serve(ctx, nc, nil)                // until ctx is done
package mcp
