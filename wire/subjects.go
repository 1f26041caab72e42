package wire

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Subject patterns: the filters that match a kind of subject for every
// session (or node, or tool).
const (
	// EventSubjects is the filter of every record of every session, in every
	// shard of the log: tah.evt.<k>.<sid>, whose <sid> is one token for a
	// session of the default tenant and two for a tenant's (<tenant>.<id>).
	EventSubjects = "tah.evt.*.>"
	// LegacyEventSubjects is the filter of every event of a log written
	// before shards and records (LegacyEventStream): tah.sess.<sid>.evt.<type>.
	// Only the migration reads it.
	LegacyEventSubjects = "tah.sess.*.evt.>"
	// NamedInputSubjects is the filter of the default tenant's sessions'
	// inputs as clients and nodes publish them: tah.sess.<sid>.in.by.<sender>,
	// the sender being the name of the publisher's credential, which the
	// server's permissions pin (InputSubject), or the node's own token.
	// Six tokens, so that no subject of a tenant's session
	// (tah.sess.<tenant>.<id>.<kind>) is one.
	NamedInputSubjects = "tah.sess.*.in.by.*"
	// InputSubjects is the filter of the default tenant's sessions' inputs
	// that name no sender: tah.sess.<sid>.in, a client's whose credential
	// was issued before inputs named their sender, or that has none.
	InputSubjects = "tah.sess.*.in"
	// TenantInputSubjects is the filter of inputs as clients publish them
	// for a tenant's sessions: tah.sess.<tenant>.<id>.in.<sender>, the
	// sender being the name of the publisher's credential (InputSubject).
	TenantInputSubjects = "tah.sess.*.*.in.*"
	// PartitionSubjects is the filter of inputs as TAH_IN stores them:
	// tah.in.<p>.<sid>, tah.in.<p>.<sid>.<sender> and
	// tah.in.<p>.<tenant>.<id>.<sender>.
	PartitionSubjects = "tah.in.*.>"
	// DeltaSubjects is the filter of the default tenant's sessions' token
	// deltas; TenantDeltaSubjects is the tenants'.
	DeltaSubjects       = "tah.sess.*.delta"
	TenantDeltaSubjects = "tah.sess.*.*.delta"
	// ErrorSubjects is the filter of the default tenant's sessions' refusals
	// (Refusal); TenantErrorSubjects is the tenants'.
	ErrorSubjects       = "tah.sess.*.err"
	TenantErrorSubjects = "tah.sess.*.*.err"
	// NodeSender is the sender token of the inputs a node makes itself (a
	// fired schedule, the Go API of its process): never a credential's name
	// (ValidCredentialName refuses it).
	NodeSender = "$node"
	// AnonymousSender is the sender token of a client's inputs that knows no
	// name of its credential (one connected without a .creds file): the node
	// records no sender for them (never a credential's name, like
	// NodeSender), as for the inputs on tah.sess.<sid>.in (InputSubject).
	AnonymousSender = "$anon"
	// AttestedSenderPrefix starts a sender token that the node's agent
	// gateway writes for a caller whose signed Agent-Sender header it
	// verified: "$" and the caller's credential name, or its user NKEY
	// where the node does not know the name. No credential's name starts
	// with it, and only a node may publish such a token.
	AttestedSenderPrefix = "$"
	// NodeSubjects is the filter of every node's presence.
	NodeSubjects = "tah.nodes.*"
	// APIPrefix starts the subject of every API endpoint: tah.api.<endpoint>.
	APIPrefix = "tah.api."
	// APIGroup is the micro endpoint group of the API (APIPrefix without its dot).
	APIGroup = "tah.api"
	// ToolPrefix starts the subject of every tool endpoint: tah.tool.<name>.
	ToolPrefix = "tah.tool."
	// ToolCancelPrefix starts the subject on which a tool call is cancelled:
	// tah.tool.cancel.<call token>.
	ToolCancelPrefix = "tah.tool.cancel."
	// ToolCancelSubjects is the filter of every tool call cancel.
	ToolCancelSubjects = ToolCancelPrefix + "*"
)

// ShardSubject is the subject of session sid's records in shard k of the
// log (k = Shard(sid, n)): tah.evt.<k>.<sid>. It is one subject per session,
// the event types being in the records: fenced appends expect its last
// sequence, and following a session is one consumer filtered on it.
func ShardSubject(k int, sid string) string { return "tah.evt." + strconv.Itoa(k) + "." + sid }

// ShardSubjects is the filter of every session's records in shard k, the
// subjects of EventShardStream(k): tah.evt.<k>.> (a tenant's session ids
// are two tokens).
func ShardSubjects(k int) string { return "tah.evt." + strconv.Itoa(k) + ".>" }

// Shard returns the shard of the log that holds session sid's records among
// n shards: the FNV-1a 32-bit hash of the session id's tokens (without the
// '.' of a tenant's), modulo n (the hash of Partition, applied to the log's
// shard count, which is independent of the input partitions).
func Shard(sid string, n int) int { return fnvMod(sid, n) }

// LegacySessionEvents is the filter of session sid's events in a log written
// before shards and records (LegacyEventStream): tah.sess.<sid>.evt.>. Only
// the migration reads it.
func LegacySessionEvents(sid string) string { return "tah.sess." + sid + ".evt.>" }

// InputSubject is where a client publishes inputs for session sid:
// tah.sess.<sid>.in.by.<sender> for a session of the default tenant and
// tah.sess.<tenant>.<id>.in.<sender> for a tenant's, sender being the name
// of the publisher's credential (NodeSender for the node's own), which the
// server's permissions pin so that the node can tell who sent an input
// from its subject; AnonymousSender for a client connected without a
// credential, whose input names nobody but goes, like a named one, straight
// to InputStream's partition. For the default tenant an empty sender gives
// tah.sess.<sid>.in, the form of a credential issued before inputs named
// their sender, which TenantInputStream stores and InputStream sources: a
// second write, and the source's hop.
func InputSubject(sid, sender string) string {
	if strings.Contains(sid, ".") {
		return "tah.sess." + sid + ".in." + sender
	}
	if sender == "" {
		return "tah.sess." + sid + ".in"
	}
	return "tah.sess." + sid + ".in.by." + sender
}

// AttestedSender returns who a sender token the agent gateway wrote names
// (AttestedSenderPrefix and a credential's name or a user NKEY), and false
// for any other token: the node's own ($node), the anonymous one, a
// credential's name.
func AttestedSender(token string) (string, bool) {
	name, ok := strings.CutPrefix(token, AttestedSenderPrefix)
	if !ok || token == NodeSender || token == AnonymousSender || ValidCredentialName(name) != nil {
		return "", false
	}
	return name, true
}

// NamedInputSubjectsOf is the filter of the inputs of every session of the
// default tenant sent by the credential named sender:
// tah.sess.*.in.by.<sender>.
func NamedInputSubjectsOf(sender string) string { return "tah.sess.*.in.by." + sender }

// TenantInputSubjectsOf is the filter of the inputs of every tenant's
// sessions sent by the credential named sender: tah.sess.*.*.in.<sender>.
func TenantInputSubjectsOf(sender string) string { return "tah.sess.*.*.in." + sender }

// PartitionSubject is the subject TAH_IN stores an input of session sid
// under, with p = Partition(sid, partitions): tah.in.<p>.<sid> for one
// published on tah.sess.<sid>.in (sender ""), else
// tah.in.<p>.<sid>.<sender> (AnonymousSender's too), and
// tah.in.<p>.<tenant>.<id>.<sender> for a tenant's session.
func PartitionSubject(p int, sid, sender string) string {
	if strings.Contains(sid, ".") {
		return fmt.Sprintf("tah.in.%d.%s.%s", p, sid, sender)
	}
	if sender == "" {
		return fmt.Sprintf("tah.in.%d.%s", p, sid)
	}
	return fmt.Sprintf("tah.in.%d.%s.%s", p, sid, sender)
}

// InputOfSubject returns the session and the sender token of an input as
// TAH_IN stores it (PartitionSubject): sender is "" for the default
// tenant's inputs published on tah.sess.<sid>.in. ok is false for any other
// subject.
func InputOfSubject(subj string) (sid, sender string, ok bool) {
	parts := strings.Split(subj, ".")
	if len(parts) < 4 || parts[0] != "tah" || parts[1] != "in" {
		return "", "", false
	}
	switch len(parts) {
	case 4:
		return parts[3], "", true
	case 5:
		return parts[3], parts[4], true
	case 6:
		return parts[3] + "." + parts[4], parts[5], true
	}
	return "", "", false
}

// PartitionFilter is the filter of partition p's consumer: tah.in.<p>.>.
func PartitionFilter(p int) string { return fmt.Sprintf("tah.in.%d.>", p) }

// PartitionConsumerPrefix starts the durable name of every partition's
// consumer.
const PartitionConsumerPrefix = "tah_in_"

// PartitionConsumer is the durable name of partition p's consumer: tah_in_<p>.
func PartitionConsumer(p int) string { return fmt.Sprintf("%s%d", PartitionConsumerPrefix, p) }

// InputTransform is the subject transform destination of TAH_IN for
// partitions partitions: the stream maps tah.sess.<sid>.in.by.<sender>
// (NamedInputSubjects) to tah.in.<FNV-1a(sid) mod partitions>.<sid>.<sender>.
func InputTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1)}}.{{wildcard(1)}}.{{wildcard(2)}}", partitions)
}

// UnnamedInputTransform is InputTransform for the default tenant's inputs
// that name no sender (InputSubjects), which TAH_TIN stores and TAH_IN
// sources: tah.sess.<sid>.in to tah.in.<FNV-1a(sid) mod partitions>.<sid>.
func UnnamedInputTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1)}}.{{wildcard(1)}}", partitions)
}

// TenantInputTransform is InputTransform for a tenant's inputs
// (TenantInputSubjects): tah.sess.<tenant>.<id>.in.<sender> to
// tah.in.<FNV-1a(<tenant><id>) mod partitions>.<tenant>.<id>.<sender>, the
// partition Partition computes for the session id.
func TenantInputTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}", partitions)
}

// DeltaSubject is the core NATS subject of session sid's token deltas.
func DeltaSubject(sid string) string { return "tah.sess." + sid + ".delta" }

// ErrorSubject is the core NATS subject where errors about session sid's
// inputs are reported (Refusal).
func ErrorSubject(sid string) string { return "tah.sess." + sid + ".err" }

// NodeSubject is the core NATS subject where node publishes its presence (a
// NodeRecord): tah.nodes.<node>.
func NodeSubject(node string) string { return "tah.nodes." + node }

// ClaimNoticeSubject is the core NATS subject on which node hears that
// another node claimed a session it may still hold (ClaimNotice):
// tah.nodes.<node>.claimed. It is under the presence's tah.nodes.>, which
// only nodes may publish and no other role may subscribe to, and the
// presence filter NodeSubjects (one token after tah.nodes.) does not match
// it.
func ClaimNoticeSubject(node string) string { return "tah.nodes." + node + ".claimed" }

// APISubject is the subject of an API endpoint: tah.api.<endpoint>.
func APISubject(endpoint string) string { return APIPrefix + endpoint }

// CommandEndpoints are the API's endpoints that store a command as an input
// of a session: a credential sends them naming itself
// (NamedAPISubject), so that the node records who ran, cancelled or decided.
func CommandEndpoints() []string {
	return []string{EndpointCompact, EndpointResume, EndpointCancel, EndpointApprove, EndpointDeny, EndpointBudget}
}

// NamedAPISubject is the subject of command endpoint for the credential
// named sender: tah.api.<endpoint>.by.<sender>, which the server's
// permissions pin to that credential as they pin its inputs' subjects.
func NamedAPISubject(endpoint, sender string) string { return APIPrefix + endpoint + ".by." + sender }

// NamedAPISubjectsOf is the filter of every command endpoint's subject for
// the credential named sender: tah.api.*.by.<sender>.
func NamedAPISubjectsOf(sender string) string { return APIPrefix + "*.by." + sender }

// NamedAPIEndpointSubject is the filter the node serves command endpoint on
// for every sender (the endpoint group's subject, without APIPrefix):
// <endpoint>.by.*.
func NamedAPIEndpointSubject(endpoint string) string { return endpoint + ".by.*" }

// APISender returns the name of the credential an API request's subject
// names, which the server pinned: tah.api.<endpoint>.by.<sender>, or a
// tenant's tah.tapi.<tenant>.<sender>.<endpoint>. ok is false for a
// subject that names none (tah.api.<endpoint>).
func APISender(subj string) (string, bool) {
	if _, cred, _, ok := TenantOfAPISubject(subj); ok {
		return cred, true
	}
	rest, ok := strings.CutPrefix(subj, APIPrefix)
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !slices.Contains(CommandEndpoints(), parts[0]) || parts[1] != "by" || ValidCredentialName(parts[2]) != nil {
		return "", false
	}
	return parts[2], true
}

// ToolSubject is the endpoint subject of the tool named name: tah.tool.<name>.
func ToolSubject(name string) string { return ToolPrefix + name }

// ToolCancelSubject is the subject on which the call callID is cancelled.
func ToolCancelSubject(callID string) string { return ToolCancelPrefix + Token(callID) }

// ToolFromSubject returns the tool name of a tah.tool.<name> subject, or ""
// when subj is not one (the cancel subjects are not).
func ToolFromSubject(subj string) string {
	name, ok := strings.CutPrefix(subj, ToolPrefix)
	if !ok || name == "" || strings.Contains(name, ".") || name == "cancel" {
		return ""
	}
	return name
}

// Partition returns the input partition of session sid among n partitions,
// as the server's subject transforms compute it ({{partition(n,1)}} of the
// default tenant's one token, {{partition(n,1,2)}} of a tenant's two): the
// FNV-1a 32-bit hash of the session id's tokens without the '.' between
// them, modulo n.
func Partition(sid string, n int) int { return fnvMod(sid, n) }

// fnvMod is the FNV-1a 32-bit hash of s's bytes but '.', modulo n (0 when n
// is not positive): the server's partition hash of s's tokens.
func fnvMod(s string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	for len(s) > 0 {
		tok, rest, _ := strings.Cut(s, ".")
		_, _ = h.Write([]byte(tok))
		s = rest
	}
	return int(h.Sum32() % uint32(n))
}

// SessionFromSubject returns the session of a tah.in.<p>.… (InputOfSubject)
// or tah.evt.<k>.<sid> subject, or of a legacy tah.sess.<sid>.evt.… one, or
// "".
func SessionFromSubject(subj string) string {
	if sid, _, ok := InputOfSubject(subj); ok {
		return sid
	}
	parts := strings.SplitN(subj, ".", 4)
	switch {
	case len(parts) == 4 && parts[0] == "tah" && parts[1] == "evt":
		return parts[3]
	case len(parts) == 4 && parts[0] == "tah" && parts[1] == "sess":
		return parts[2]
	}
	return ""
}
