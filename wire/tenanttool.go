package wire

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tah-dev/tah/event"
)

// A tenant's tools (docs/tenancy.md, "A tenant's tools"; docs/protocol.md,
// "A tenant's tools"): a tool credential of tenant acme serves tools to
// acme's sessions only, on subjects and under names that carry the tenant,
// so that the server alone keeps another tenant's credential (and every
// all-tenant one but the node's) from serving, describing or reading them:
//
//	endpoint      tah.ttool.<tenant>.<tool>            (TenantToolSubject)
//	service       tah-ttool-<tenant>__<tool>           (TenantToolService)
//	cancels       tah.ttool.<tenant>.cancel.<call>     (TenantToolCancelSubject)
//	ledger keys   t=<tenant>.<tool>.<session>.<call>   (TenantResultKey)
//
// A tenant's name has no '_', so the first "__" of such a service's name
// ends the tenant. A tenant's tool credential has no JetStream API but the
// direct gets of its own ledger keys: a stream's info lists the keys, every
// tenant's session ids among them.
const (
	// TenantToolPrefix starts the subject of every tenant's tool endpoint.
	TenantToolPrefix = "tah.ttool."
	// TenantToolServicePrefix starts the name of a tenant's tool's micro
	// service (ToolServicePrefix, tah-tool-, is another prefix).
	TenantToolServicePrefix = "tah-ttool-"
	// tenantToolSep ends the tenant in a tenant's tool's service name.
	tenantToolSep = "__"
	// tenantKeyPrefix starts the first token of a tenant's tool's ledger
	// keys: t=<tenant>. No tool's name has a '='.
	tenantKeyPrefix = "t="
)

// TenantToolSubject is the endpoint of tenant's tool name:
// tah.ttool.<tenant>.<name>.
func TenantToolSubject(tenant, name string) string { return TenantToolPrefix + tenant + "." + name }

// TenantToolService is the micro service of tenant's tool name:
// tah-ttool-<tenant>__<name>.
func TenantToolService(tenant, name string) string {
	return TenantToolServicePrefix + tenant + tenantToolSep + name
}

// TenantToolOfService is the tenant and tool of a service named
// TenantToolService, and whether service is one.
func TenantToolOfService(service string) (tenant, name string, ok bool) {
	rest, ok := strings.CutPrefix(service, TenantToolServicePrefix)
	if !ok {
		return "", "", false
	}
	tenant, name, ok = strings.Cut(rest, tenantToolSep)
	if !ok || event.ValidTenant(tenant) != nil || !credentialName.MatchString(name) || name == "cancel" {
		return "", "", false
	}
	return tenant, name, true
}

// TenantToolCancelSubject is where a call of a tenant's tool is cancelled:
// tah.ttool.<tenant>.cancel.<call token>.
func TenantToolCancelSubject(tenant, callID string) string {
	return TenantToolCancelPrefix(tenant) + Token(callID)
}

// TenantToolCancelPrefix starts the subjects of the cancels of tenant's
// tools' calls: tah.ttool.<tenant>.cancel.
func TenantToolCancelPrefix(tenant string) string { return TenantToolPrefix + tenant + ".cancel." }

// TenantResultKey is the key in ToolResultBucket of a call of tenant's tool:
// t=<tenant>.<tool>.<session token>.<call token>. It has the shape of a
// namespace's key, so that NamespaceResultKeyFilter finds it too.
func TenantResultKey(tenant, tool, session, callID string) string {
	return tenantKeyPrefix + tenant + "." + Token(tool) + "." + callKey(session, callID)
}

// TenantResultSubjects is the filter of the subjects of tenant's tool's
// calls in ToolResultBucket: $KV.tah_tool_results.t=<tenant>.<tool>.>.
func TenantResultSubjects(tenant, tool string) string {
	return "$KV." + ToolResultBucket + "." + tenantKeyPrefix + tenant + "." + Token(tool) + ".>"
}

// tenantToolPermissions: serve and describe the tenant's tools named, read
// their cancels, store and read their calls under their keys alone, answer
// the requests received. No JetStream API but the direct gets of its keys
// (see above), no tool of another tenant's or of every tenant's, no
// namespace (yet).
func tenantToolPermissions(tenant, inbox string, tools []string) (Permissions, error) {
	if len(tools) == 0 {
		return Permissions{}, fmt.Errorf("a tool credential needs the names of the tools it serves: %w", ErrBadToolNames)
	}
	var pub []string
	sub := []string{inbox, TenantToolCancelPrefix(tenant) + "*"}
	for _, t := range slices.Sorted(slices.Values(tools)) {
		if _, ok := ToolNamespaceOfGrant(t); ok {
			return Permissions{}, fmt.Errorf("%q: a tenant's tool credential names its tools one by one (namespaces are every tenant's only, for now): %w", t, ErrBadToolNames)
		}
		if !credentialName.MatchString(t) || t == "cancel" {
			return Permissions{}, fmt.Errorf("tool name %q: use 1 to 64 letters, digits, '-' or '_' (not cancel): %w", t, ErrBadToolNames)
		}
		svc := TenantToolService(tenant, t)
		pub = append(pub, TenantResultSubjects(tenant, t), jsAPI+"DIRECT.GET."+ToolResultStream+"."+TenantResultSubjects(tenant, t))
		sub = append(sub, TenantToolSubject(tenant, t), "$SRV.*."+svc, "$SRV.*."+svc+".*")
	}
	sub = append(sub, "$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	return Permissions{PublishAllow: pub, PublishDeny: append(nodeOnly(), nodeStreamDenies(ToolResultStream)...), SubscribeAllow: sub,
		SubscribeDeny: []string{APIPrefix + ">", "tah.in.>"}, AllowResponses: true}, nil
}
