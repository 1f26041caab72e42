package wire

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Subject patterns: the filters that match a kind of subject for every
// session (or node, or tool).
const (
	// EventSubjects is the filter of every record of every session, in every
	// shard of the log.
	EventSubjects = "tah.evt.*.*"
	// LegacyEventSubjects is the filter of every event of a log written
	// before shards and records (LegacyEventStream): tah.sess.<sid>.evt.<type>.
	// Only the migration reads it.
	LegacyEventSubjects = "tah.sess.*.evt.>"
	// InputSubjects is the filter of inputs as clients publish them.
	InputSubjects = "tah.sess.*.in"
	// PartitionSubjects is the filter of inputs as TAH_IN stores them.
	PartitionSubjects = "tah.in.*.*"
	// DeltaSubjects is the filter of every session's token deltas.
	DeltaSubjects = "tah.sess.*.delta"
	// ErrorSubjects is the filter of every session's refusals (Refusal).
	ErrorSubjects = "tah.sess.*.err"
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
// subjects of EventShardStream(k): tah.evt.<k>.*.
func ShardSubjects(k int) string { return "tah.evt." + strconv.Itoa(k) + ".*" }

// Shard returns the shard of the log that holds session sid's records among
// n shards: the FNV-1a 32-bit hash of the session id, modulo n (the hash of
// Partition, applied to the log's shard count, which is independent of the
// input partitions).
func Shard(sid string, n int) int { return fnvMod(sid, n) }

// LegacySessionEvents is the filter of session sid's events in a log written
// before shards and records (LegacyEventStream): tah.sess.<sid>.evt.>. Only
// the migration reads it.
func LegacySessionEvents(sid string) string { return "tah.sess." + sid + ".evt.>" }

// InputSubject is where clients publish inputs for session sid: tah.sess.<sid>.in.
func InputSubject(sid string) string { return "tah.sess." + sid + ".in" }

// PartitionSubject is the subject TAH_IN stores an input of session sid
// under, with p = Partition(sid, partitions): tah.in.<p>.<sid>.
func PartitionSubject(p int, sid string) string { return fmt.Sprintf("tah.in.%d.%s", p, sid) }

// PartitionFilter is the filter of partition p's consumer: tah.in.<p>.*.
func PartitionFilter(p int) string { return fmt.Sprintf("tah.in.%d.*", p) }

// PartitionConsumerPrefix starts the durable name of every partition's
// consumer.
const PartitionConsumerPrefix = "tah_in_"

// PartitionConsumer is the durable name of partition p's consumer: tah_in_<p>.
func PartitionConsumer(p int) string { return fmt.Sprintf("%s%d", PartitionConsumerPrefix, p) }

// InputTransform is the subject transform destination of TAH_IN for
// partitions partitions: the stream maps tah.sess.<sid>.in to
// tah.in.<FNV-1a(sid) mod partitions>.<sid>.
func InputTransform(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1)}}.{{wildcard(1)}}", partitions)
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
// as the server's subject transform {{partition(n,1)}} computes it: the
// FNV-1a 32-bit hash of the session id, modulo n.
func Partition(sid string, n int) int { return fnvMod(sid, n) }

// fnvMod is the FNV-1a 32-bit hash of s modulo n (0 when n is not positive).
func fnvMod(s string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

// SessionFromSubject returns the session of a tah.sess.<sid>.…,
// tah.in.<p>.<sid> or tah.evt.<k>.<sid> subject, or "".
func SessionFromSubject(subj string) string {
	parts := strings.Split(subj, ".")
	switch {
	case len(parts) >= 3 && parts[0] == "tah" && parts[1] == "sess":
		return parts[2]
	case len(parts) == 4 && parts[0] == "tah" && (parts[1] == "in" || parts[1] == "evt"):
		return parts[3]
	}
	return ""
}
