// Package toolservice offers Go tools to TAH nodes over NATS, as a tool service
// in the sense of docs/protocol.md ("Tool services"): one micro service per tool,
// named tah-tool-<name>, with an endpoint on tah.tool.<name> in queue group
// tah-tools, its description and input schema in the endpoint metadata.
//
// For every call the service stores a "running" record under the call's key in
// the KV bucket tah_tool_results, runs the tool through a tools.Executor (input
// validation, timeout, panic recovery), stores the "done" record with the result
// and only then replies, so that a node that lost the reply (its owner died) finds
// the result by call id. A message on tah.tool.cancel.<call token> cancels the
// call's context at once. Run as many instances as you like: the queue group
// spreads the calls.
//
// With Config.Namespace, the tools are a namespace's (wire.ToolNamespaceGrant:
// the tools <ns>__<tool>, services tah-tools-<ns>, endpoints
// tah.tool.<ns>.<tool>), served under a credential that grants the
// namespace rather than naming each tool; Set changes the tools served
// while the service runs (tools/mcp serves an MCP server's so).
//
// With Config.Tenant, the tools are a tenant's, offered to that tenant's
// sessions alone (services tah-ttool-<tenant>__<name>, endpoints
// tah.ttool.<tenant>.<name>, cancels on tah.ttool.<tenant>.cancel.*), under
// a tool credential of the tenant, which NATS lets serve nothing else.
//
// The smallest use:
//
//	nc, _ := nats.Connect(url)
//	err := toolservice.Serve(ctx, nc, myTool) // until ctx is done
//
// With settings, and a handle:
//
//	svc, err := toolservice.Start(ctx, nc, toolservice.Config{MaxConcurrent: 4}, myTool, otherTool)
//	...
//	err = svc.Close(ctx) // stop taking calls, let those in flight finish until ctx is done
package toolservice
