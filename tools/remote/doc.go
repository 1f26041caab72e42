// Package remote lists and calls tools that other processes, in any language,
// offer on NATS as micro services, and holds the wire contract of such tool
// services (docs/protocol.md, "Tool services"; tools/toolservice writes one in Go,
// examples/tool-service-js in JavaScript).
//
// A Registry discovers tools through the micro discovery subjects: $SRV.INFO
// names the tool services, and a tool is the endpoint on tah.tool.<name> that
// the service tah-tool-<name> describes in its answer to its own verb,
// $SRV.INFO.tah-tool-<name>, which only a credential allowed to serve that
// name receives (its metadata: description, schema, idempotent, exclusive,
// timeout_ms). The tools of a namespace (wire.ToolNamespaceGrant) are the
// endpoints on tah.tool.<ns>.<tool> that the services tah-tools-<ns>
// describe in their answers to $SRV.INFO.tah-tools-<ns>, as the tools
// <ns>__<tool>. A tenant's tools (wire.TenantToolService) are the endpoints
// on tah.ttool.<tenant>.<tool> that the services tah-ttool-<tenant>__<tool>
// describe, kept apart: Registry.Tenant is the catalog of one tenant's,
// which only its sessions get. Discovery follows the services: it runs again on the
// connection's reconnect, when a call finds no service, while a call waits
// for one (WaitFor) or a tool is missing, and on an optional period. It
// implements tools.Catalog, so tools.Merge lists remote tools beside local
// ones. A call that reaches no runner fails with code tool_unavailable (it did
// not run): a caller may WaitFor the service and call again. For
// ServiceWait after it opens, a registry expects the tools it has not listed
// yet (Expected): the services that were connected to a node that restarted
// reconnect on their own, some after it started, and a session whose last
// request offered such a tool waits for it before its next request. Calling a
// remote tool sends the call id, session and deadline; cancelling it publishes on
// tah.tool.cancel.<call token>. Services store every call in the KV bucket
// tah_tool_results before they reply, so a caller that lost the reply, or a node
// that took over the session, finds the result with Lookup (or waits for it with
// Await); while a call waits, the registry probes its stored state and notices a
// runner that died (code "interrupted").
//
// The smallest use:
//
//	reg, err := remote.Open(nc, remote.Config{RefreshEvery: 30 * time.Second, ServiceWait: 30 * time.Second})
//	defer reg.Close(ctx)
//	exec := tools.NewExecutor(tools.Merge(local, reg), tools.Options{})
//	res := exec.Execute(tools.WithCall(ctx, tools.CallInfo{Session: sid}), call)
//
// On resume, for a tool step that started and has no result:
//
//	st, err := reg.Lookup(ctx, sid, callID) // errors.Is(err, remote.ErrNoResult) when none
package remote
