package wire

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Role is a kind of credential: what its holder may publish and subscribe
// to on the bus (RolePermissions), enforced by the NATS server itself.
type Role string

// The roles. docs/security.md says what each may and may not do.
const (
	// RoleNode is a TAH node: everything TAH itself does.
	RoleNode Role = "node"
	// RoleAdmin is a client that may also issue, list and revoke credentials.
	RoleAdmin Role = "admin"
	// RoleClient sends inputs and API requests and reads events and deltas,
	// through ephemeral or ordered consumers only.
	RoleClient Role = "client"
	// RoleTool serves the tools it was issued (ToolSubject), or every tool
	// of the namespaces it was issued (ToolNamespaceGrant), answers their
	// discovery, reads cancels and writes the ledger under its own names.
	RoleTool Role = "tool"
	// RoleObserver only reads: the API's reads, events, deltas.
	RoleObserver Role = "observer"
	// RoleAgents is a node's agent protocol gateway (package agents): it
	// serves the micro service "agents", answers its discovery, prompts and
	// status requests on the callers' inboxes and publishes heartbeats, and
	// may touch no subject of TAH's, so that no reply subject a caller names
	// can make it write the log, an input or a bucket.
	RoleAgents Role = "agents"
)

// Roles lists the roles, in the order of docs/security.md.
func Roles() []Role {
	return []Role{RoleNode, RoleAdmin, RoleClient, RoleTool, RoleObserver, RoleAgents}
}

// Errors of RolePermissions.
var (
	// ErrUnknownRole: a role that is none of Roles().
	ErrUnknownRole = errors.New("unknown role")
	// ErrBadCredentialName: a credential's name that cannot be a subject
	// token (it names the holder's inbox prefix).
	ErrBadCredentialName = errors.New("invalid credential name")
	// ErrBadToolNames: a tool credential without tool names, or with a name
	// that cannot be a subject token or a namespace's grant that names no
	// valid namespace; or tool names given to another role.
	ErrBadToolNames = errors.New("invalid tool names")
	// ErrBadTenant: a tenant's name that is not one (event.ValidTenant).
	ErrBadTenant = errors.New("invalid tenant name")
)

// The prefixes of the tags of a credential's user JWT: its role, each tool
// it serves, its tenant (TenantRolePermissions). A client reads its tenant
// there; the server keeps tags in lower case, as every value here is.
const (
	RoleTag   = "role:"
	ToolTag   = "tool:"
	TenantTag = "tenant:"
)

// Permissions are a credential's NATS publish and subscribe allow and deny
// lists (a deny wins over an allow; what no allow names is denied, unless
// the allow list is empty: then everything is allowed).
type Permissions struct {
	PublishAllow   []string `json:"publish_allow,omitempty"`
	PublishDeny    []string `json:"publish_deny,omitempty"`
	SubscribeAllow []string `json:"subscribe_allow,omitempty"`
	SubscribeDeny  []string `json:"subscribe_deny,omitempty"`
	// AllowResponses lets the holder answer the requests it received (on
	// their reply subjects), and nothing else of _INBOX: a tool's answers,
	// and the discovery replies of the services (one per tool) that a tool
	// service runs on one connection.
	AllowResponses bool `json:"allow_responses,omitempty"`
}

// CredentialInboxBase starts the inbox prefix of every credential: one
// named NAME receives its replies under _INBOX_NAME. (CredentialInbox).
const CredentialInboxBase = "_INBOX_"

// CredentialInbox is the inbox prefix of the credential named name (nats.go's
// CustomInboxPrefix): _INBOX_<name>. Its holder may subscribe under it only.
func CredentialInbox(name string) string { return CredentialInboxBase + name }

// credentialName is what a credential's and a tool's name may be: one subject
// token of plain characters.
var credentialName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidCredentialName reports, wrapping ErrBadCredentialName, why name
// cannot name a credential.
func ValidCredentialName(name string) error {
	if !credentialName.MatchString(name) {
		return fmt.Errorf("%q: use 1 to 64 letters, digits, '-' or '_': %w", name, ErrBadCredentialName)
	}
	return nil
}

// jsAPI starts the subjects of the JetStream API.
const jsAPI = "$JS.API."

// readEvents lets the holder read the log: streams' info, direct gets, and
// consumers of its own filtered on the log's subjects (the filter is in the
// create subject: $JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>), read
// but not deleted: a delete names only a stream and a consumer, and would
// reach the consumers a node reads the log with (its read model's tail),
// whatever their names; a client's consumers are removed by the server
// once idle (their inactive threshold). A subject wildcard is a whole
// token, so the shards (TAH_EVT_<k>) cannot be named by a pattern: the
// node's streams are denied by name instead (nodeStreamDenies).
func readEvents() []string {
	return []string{
		jsAPI + "INFO",
		jsAPI + "STREAM.INFO.*",
		jsAPI + "DIRECT.GET.*",
		jsAPI + "DIRECT.GET.*.>",
		jsAPI + "CONSUMER.CREATE.*.*.tah.evt.>",
		jsAPI + "CONSUMER.INFO.*.*",
		jsAPI + "CONSUMER.MSG.NEXT.*.*",
	}
}

// nodeStreams are the streams of the node's inputs, buckets and object
// store: no client reads them or touches their consumers. (TenantInputStream
// is not among them: it allows no direct gets and has no durable consumer,
// only the input stream's sourcing, which no pattern of readEvents reaches;
// and every byte here is in every credential's JWT, which a server's
// default max_control_line of 4 KiB must take.) (The registry of
// credentials is among them: only nodes, and admins through the API, read
// it.)
func nodeStreams() []string {
	return []string{InputStream, "KV_" + CheckpointBucket, ToolResultStream, "KV_" + NodeBucket, "KV_" + LockBucket, "OBJ_" + ArtifactBucket,
		"KV_" + CredsBucket}
}

// agentsDiscovery are the discovery verbs of the agents service a caller
// may send: only the ones qualified by its name (the bare $SRV.PING, INFO
// and STATS would reach every service of the account, answered by
// connections that may write TAH's subjects).
func agentsDiscovery() []string {
	var out []string
	for _, verb := range []string{"PING", "INFO", "STATS"} {
		out = append(out, "$SRV."+verb+"."+AgentsService, "$SRV."+verb+"."+AgentsService+".*")
	}
	return out
}

// Agent protocol subjects a caller publishes on: prompts and status
// requests of every instance.
const (
	agentPrompts  = AgentsPrefix + AgentVerbPrompt + ".>"
	agentStatuses = AgentsPrefix + AgentVerbStatus + ".>"
)

// nodeStreamDenies deny the consumers (the node's durable input consumers
// among them, by their stream's name) and direct gets of the node's streams
// but except's, and the consumers of the answers' streams
// (NoDirectStreams): readEvents' patterns would reach them. (A consumer
// filtered on tah.evt.> cannot be created on them: the filter must be
// their own.)
func nodeStreamDenies(except string) []string {
	var out []string
	for _, s := range nodeStreams() {
		if s != except {
			out = append(out, jsAPI+"CONSUMER.*."+s+".*", jsAPI+"CONSUMER.MSG.NEXT."+s+".*", jsAPI+"DIRECT.GET."+s, jsAPI+"DIRECT.GET."+s+".>")
		}
	}
	for _, s := range NoDirectStreams() {
		out = append(out, jsAPI+"CONSUMER.*."+s+".*", jsAPI+"CONSUMER.MSG.NEXT."+s+".*")
	}
	return out
}

// NoDirectStreams are the node's streams that serve no direct get (their
// configuration allows none: bus checks it), whose consumers alone a
// credential must be denied: the answers to the agent protocol's queries.
// Two entries each rather than nodeStreams' four, since every byte here is
// in every credential's JWT (see nodeStreams).
func NoDirectStreams() []string { return []string{AnswerStream, TenantAnswerStream} }

// readEndpoints are the API endpoints that change nothing.
var readEndpoints = []string{EndpointGet, EndpointList, EndpointMessages, EndpointSteps, EndpointEvents,
	EndpointRequest, EndpointTools, EndpointStatus, EndpointArtifacts, EndpointArtifact, EndpointSchedules, EndpointReplay}

// nodeOnly are what no credential but the node's may publish, said
// explicitly although no allow names them, so that no later allow can open
// them: the log, the input partitions, presence, tool endpoints, the node's
// buckets. Everything else no allow names (the administration of streams and
// consumers, the system account) is denied as well.
func nodeOnly() []string {
	return []string{"tah.evt.>", "tah.in.>", "tah.nodes.>", ScheduleSubjects, ToolPrefix + ">",
		"$KV." + CheckpointBucket + ".>", "$KV." + NodeBucket + ".>", "$KV." + LockBucket + ".>", "$KV." + CredsBucket + ".>", "$O.>"}
}

// clientDenies are nodeOnly, the node's streams, and every KV bucket: a
// client writes no ledger.
func clientDenies() []string { return append(append(nodeOnly(), nodeStreamDenies("")...), "$KV.>") }

// subscribeDenies are what only nodes and tools receive: API requests, tool
// calls, stored inputs, the system account.
func subscribeDenies() []string { return []string{ToolPrefix + ">", APIPrefix + ">", "tah.in.>"} }

// sessionFeeds are what a client or an observer receives: its inbox, every
// session's deltas and refusals (the default tenant's and the tenants'),
// and the agents' heartbeats.
func sessionFeeds(inbox string) []string {
	return []string{inbox, DeltaSubjects, TenantDeltaSubjects, ErrorSubjects, TenantErrorSubjects, AgentsHeartbeats}
}

// RolePermissions is the table of what each role may do, for the credential
// named name (tools: the tool names a tool credential serves, and
// "<ns>__*" for every tool of namespace ns). The node's
// role has no lists: it may do everything.
func RolePermissions(role Role, name string, tools []string) (Permissions, error) {
	if err := ValidCredentialName(name); err != nil {
		return Permissions{}, err
	}
	if role != RoleTool && len(tools) > 0 {
		return Permissions{}, fmt.Errorf("tool names for the %s role (only a tool credential serves tools): %w", role, ErrBadToolNames)
	}
	inbox := CredentialInbox(name) + ".>"
	switch role {
	case RoleNode:
		return Permissions{}, nil
	case RoleAdmin, RoleClient:
		// Inputs name their sender: this credential's name, and no other
		// (wire.InputSubject), so that the node records who sent each; the
		// form that names none (InputSubjects) is not allowed.
		// So do the API's commands (tah.api.<endpoint>.by.<name>): their
		// unnamed subjects are denied.
		pub := append([]string{APIPrefix + "*", NamedAPISubjectsOf(name), NamedInputSubjectsOf(name), TenantInputSubjectsOf(name), AnswerSubjects, agentPrompts, agentStatuses}, readEvents()...)
		if role == RoleAdmin {
			pub = append(pub, CredsAPIPrefix+">")
		}
		deny := clientDenies()
		for _, e := range CommandEndpoints() {
			deny = append(deny, APISubject(e))
		}
		return Permissions{PublishAllow: append(pub, agentsDiscovery()...), PublishDeny: deny,
			SubscribeAllow: sessionFeeds(inbox), SubscribeDeny: subscribeDenies()}, nil
	case RoleObserver:
		pub := []string{agentStatuses}
		for _, e := range readEndpoints {
			pub = append(pub, APISubject(e))
		}
		pub = append(append(pub, readEvents()...), agentsDiscovery()...)
		return Permissions{PublishAllow: pub, PublishDeny: append(clientDenies(), InputSubjects, AnswerSubjects, agentPrompts),
			SubscribeAllow: sessionFeeds(inbox), SubscribeDeny: subscribeDenies()}, nil
	case RoleAgents:
		// Replies go to the callers' inboxes, whatever their prefix: every
		// subject but TAH's, the system's, the discovery verbs and the
		// endpoints of other agents (heartbeats are its own to publish).
		return Permissions{PublishAllow: []string{">"},
			PublishDeny: []string{"tah.>", "$JS.>", "$KV.>", "$O.>", "$SYS.>", "$SRV.>", agentPrompts, agentStatuses,
				AgentsPrefix + "attachments.>"},
			SubscribeAllow: []string{inbox, agentPrompts, agentStatuses, "$SRV.PING", "$SRV.INFO", "$SRV.STATS",
				"$SRV.*." + AgentsService, "$SRV.*." + AgentsService + ".*"},
			SubscribeDeny: subscribeDenies()}, nil
	case RoleTool:
		return toolPermissions(inbox, tools)
	}
	return Permissions{}, fmt.Errorf("%q (one of %v): %w", role, Roles(), ErrUnknownRole)
}

// toolPermissions: serve and discover its tools, read cancels, write and
// read the ledger under its tools' names, answer the requests it receives.
// An entry "<ns>__*" grants every tool of namespace ns (namespace.go): a
// fixed set of wildcards over the namespace's own subjects, however many
// tools it has.
func toolPermissions(inbox string, tools []string) (Permissions, error) {
	if len(tools) == 0 {
		return Permissions{}, fmt.Errorf("a tool credential needs the names of the tools it serves: %w", ErrBadToolNames)
	}
	pub := []string{jsAPI + "INFO", jsAPI + "STREAM.INFO." + ToolResultStream}
	sub := []string{inbox, ToolCancelSubjects}
	for _, t := range slices.Sorted(slices.Values(tools)) {
		if ns, ok := ToolNamespaceOfGrant(t); ok {
			if err := ValidToolNamespace(ns); err != nil {
				return Permissions{}, fmt.Errorf("tool namespace of %q: %w: %w", t, err, ErrBadToolNames)
			}
			svc := ToolNamespaceService(ns)
			pub = append(pub, NamespaceResultSubjects(ns), jsAPI+"DIRECT.GET."+ToolResultStream+"."+NamespaceResultSubjects(ns))
			sub = append(sub, NamespaceToolSubjects(ns), "$SRV.*."+svc, "$SRV.*."+svc+".*")
			continue
		}
		if !credentialName.MatchString(t) {
			return Permissions{}, fmt.Errorf("tool name %q: use 1 to 64 letters, digits, '-' or '_', or NAMESPACE__* for every tool of a namespace: %w", t, ErrBadToolNames)
		}
		svc := ToolServicePrefix + t
		pub = append(pub, ToolResultSubjects(t), jsAPI+"DIRECT.GET."+ToolResultStream+"."+ToolResultSubjects(t))
		sub = append(sub, ToolSubject(t), "$SRV.*."+svc, "$SRV.*."+svc+".*")
	}
	// The generic discovery verbs ($SRV.PING, ...) are every service's: a
	// tool answers them too, and the node trusts a tool's record only from
	// the answer to its own name's verb, which only that tool receives.
	sub = append(sub, "$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	return Permissions{PublishAllow: pub, PublishDeny: append(nodeOnly(), nodeStreamDenies(ToolResultStream)...), SubscribeAllow: sub,
		SubscribeDeny: []string{APIPrefix + ">", "tah.in.>"}, AllowResponses: true}, nil
}

// NodeNeeds are subjects a node publishes and subscribes to, one of each
// kind: a credential the node runs with (an external cluster's, made with
// nsc) must allow them all. node names the node (its presence).
func NodeNeeds(node string) (publish, subscribe []string) {
	const sid, tenantSID = "s_00000000000000000000", "acme.s_00000000000000000000"
	publish = []string{
		ShardSubject(0, sid), PartitionSubject(0, sid, ""), InputSubject(sid, ""), ErrorSubject(sid), DeltaSubject(sid),
		ShardSubject(0, tenantSID), PartitionSubject(0, tenantSID, NodeSender), InputSubject(tenantSID, NodeSender),
		ErrorSubject(tenantSID), DeltaSubject(tenantSID),
		NodeSubject(node), ClaimNoticeSubject("other"), ToolSubject("read_file"), ToolCancelSubject("call_1"),
		TenantToolSubject("acme", "shout"), TenantToolCancelSubject("acme", "call_1"),
		"$KV." + CheckpointBucket + "." + sid, "$KV." + NodeBucket + "." + node, "$KV." + ToolResultBucket + "." + ResultKey("read_file", sid, "call_1"),
		"$O." + ArtifactBucket + ".C.x",
		jsAPI + "INFO", jsAPI + "STREAM.CREATE." + EventShardStream(0), jsAPI + "STREAM.UPDATE." + InputStream,
		jsAPI + "CONSUMER.CREATE." + InputStream + "." + PartitionConsumer(0), jsAPI + "CONSUMER.MSG.NEXT." + InputStream + "." + PartitionConsumer(0),
		jsAPI + "DIRECT.GET." + EventShardStream(0), "$JS.ACK." + InputStream + ".x",
		UsageSessionsSubject("acme"), UsageDaySubject("acme", time.Unix(0, 0), UsageDayTokens), UsageSecSubject("acme", time.Unix(0, 0)),
		TurnSubject("acme", 0), jsAPI + "STREAM.MSG.DELETE." + TurnStream,
		jsAPI + "STREAM.MSG.GET." + UsageDayStream,
		"_INBOX.x", CredentialInbox("alice") + ".x", "$SRV.INFO",
	}
	subscribe = []string{
		APISubject(EndpointCreate), DeltaSubjects, ErrorSubjects, NodeSubjects, ClaimNoticeSubject(node), ToolCancelSubjects,
		"_INBOX.x", "$SRV.PING", "$SRV.INFO." + APIService,
	}
	return publish, subscribe
}
