package wire

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Tool namespaces. A tool service may serve every tool named <ns>__<tool>
// of a namespace ns under one tool credential that names the namespace
// ("<ns>__*", ToolNamespaceGrant) rather than each tool: the credential's
// permissions are NATS wildcards over the namespace's own subjects, so its
// size does not grow with the tools, and a tool added later is served
// without a new credential (the tools of an MCP server, package tools/mcp).
// A namespace's subjects have the namespace as a token of its own, which
// no other namespace and no tool outside it has:
//
//	endpoint      tah.tool.<ns>.<tool>            (NamespaceToolSubject)
//	services      tah-tools-<ns>, one per tool    (ToolNamespaceService)
//	ledger keys   ns=<ns>.<tool>.<session>.<call> (NamespaceResultKey)
//
// So a namespace's credential can serve, describe and store the calls of
// its namespace's tools only, as a tool credential can its own tools'.
const (
	// ToolNamespaceSep joins a namespace and the tool's own name: <ns>__<tool>.
	ToolNamespaceSep = "__"
	// ToolNamespaceServicePrefix starts the name of the micro services of a
	// namespace's tools: tah-tools-<ns> (ToolServicePrefix, tah-tool-, is
	// another prefix: no tool's service has such a name).
	ToolNamespaceServicePrefix = "tah-tools-"
	// MaxToolNamespaceLen is the longest namespace: it leaves room for the
	// separator and a one-character tool within a tool name's 64.
	MaxToolNamespaceLen = 61
	// namespaceKeyPrefix starts the first token of a namespace's ledger
	// keys: ns=<ns>. No tool's name has a '=', so no other key starts so.
	namespaceKeyPrefix = "ns="
	// grantSuffix ends the entry of a tool credential's tools that grants
	// a namespace: <ns>__*.
	grantSuffix = ToolNamespaceSep + "*"
)

// ErrBadToolNamespace: a namespace that is not ValidToolNamespace.
var ErrBadToolNamespace = errors.New("invalid tool namespace")

// toolNamespace: letters, digits and '-', in words joined by single '_'.
// With no "__" inside and no '_' at either end, the first "__" of a tool's
// name is the one after its namespace (SplitToolName).
var toolNamespace = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// ValidToolNamespace reports, wrapping ErrBadToolNamespace, why ns cannot
// be a namespace: letters, digits and '-' in words joined by single '_', at
// most MaxToolNamespaceLen characters, and not "cancel" (tah.tool.cancel.*
// are the cancels).
func ValidToolNamespace(ns string) error {
	if !toolNamespace.MatchString(ns) || len(ns) > MaxToolNamespaceLen || ns == "cancel" {
		return fmt.Errorf("%q: use letters, digits, '-' and single '_', at most %d, not \"cancel\": %w", ns, MaxToolNamespaceLen, ErrBadToolNamespace)
	}
	return nil
}

// ToolNamespaceGrant is the entry of a tool credential's tools that grants
// every tool of namespace ns: "<ns>__*".
func ToolNamespaceGrant(ns string) string { return ns + grantSuffix }

// ToolNamespaceOfGrant returns the namespace a tool credential's entry
// grants ("fs__*": "fs"), or false when the entry names one tool. The
// namespace is not checked (ValidToolNamespace).
func ToolNamespaceOfGrant(entry string) (string, bool) {
	return strings.CutSuffix(entry, grantSuffix)
}

// SplitToolName returns the namespace and the tool's own name of a tool
// named <ns>__<tool> ("fs__read_text_file": "fs", "read_text_file"); false
// when name is no valid tool name of a namespace.
func SplitToolName(name string) (ns, tool string, ok bool) {
	ns, tool, ok = strings.Cut(name, ToolNamespaceSep)
	if !ok || tool == "" || !credentialName.MatchString(name) || ValidToolNamespace(ns) != nil {
		return "", "", false
	}
	return ns, tool, true
}

// NamespaceToolSubject is the endpoint subject of the tool <ns>__<tool>
// served by its namespace: tah.tool.<ns>.<tool>.
func NamespaceToolSubject(ns, tool string) string { return ToolPrefix + ns + "." + tool }

// NamespaceToolSubjects is the filter of the endpoints of namespace ns:
// tah.tool.<ns>.*.
func NamespaceToolSubjects(ns string) string { return ToolPrefix + ns + ".*" }

// ToolOfNamespaceSubject returns the tool's own name of a
// tah.tool.<ns>.<tool> subject, or "" when subj is not one of ns's.
func ToolOfNamespaceSubject(ns, subj string) string {
	tool, ok := strings.CutPrefix(subj, ToolPrefix+ns+".")
	if !ok || tool == "" || strings.Contains(tool, ".") {
		return ""
	}
	if _, _, ok := SplitToolName(ns + ToolNamespaceSep + tool); !ok {
		return ""
	}
	return tool
}

// ToolNamespaceService is the name of the micro services of namespace ns's
// tools: tah-tools-<ns>.
func ToolNamespaceService(ns string) string { return ToolNamespaceServicePrefix + ns }

// ToolNamespaceOfService returns the namespace of a tah-tools-<ns> service,
// or false.
func ToolNamespaceOfService(service string) (string, bool) {
	ns, ok := strings.CutPrefix(service, ToolNamespaceServicePrefix)
	if !ok || ValidToolNamespace(ns) != nil {
		return "", false
	}
	return ns, true
}

// NamespaceResultKey is the key in ToolResultBucket of a call of the tool
// <ns>__<tool> served by its namespace:
// ns=<ns>.<tool>.<session token>.<call token>.
func NamespaceResultKey(ns, tool, session, callID string) string {
	return namespaceKeyPrefix + ns + "." + tool + "." + callKey(session, callID)
}

// NamespaceResultKeyFilter matches the key of a call whatever the
// namespace and tool that stored it: *.*.<session token>.<call token>.
func NamespaceResultKeyFilter(session, callID string) string {
	return "*.*." + callKey(session, callID)
}

// NamespaceResultSubjects is the filter of the subjects of namespace ns's
// calls in ToolResultBucket: $KV.tah_tool_results.ns=<ns>.>.
func NamespaceResultSubjects(ns string) string {
	return "$KV." + ToolResultBucket + "." + namespaceKeyPrefix + ns + ".>"
}

// CallResultKey is the key in ToolResultBucket of a call of the tool named
// tool that service runs: NamespaceResultKey when service is its
// namespace's (tah-tools-<ns>), TenantResultKey when it is a tenant's
// (tah-ttool-<tenant>__<tool>), ResultKey otherwise.
func CallResultKey(service, tool, session, callID string) string {
	if tenant, name, ok := TenantToolOfService(service); ok && name == tool {
		return TenantResultKey(tenant, tool, session, callID)
	}
	if ns, ok := ToolNamespaceOfService(service); ok {
		if tns, own, ok := SplitToolName(tool); ok && tns == ns {
			return NamespaceResultKey(ns, own, session, callID)
		}
	}
	return ResultKey(tool, session, callID)
}
