package bus

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/tah-dev/tah/event"
)

// ProtocolVersion is the version of the wire contract described in
// docs/protocol.md: subjects, headers, streams, buckets and payloads.
const ProtocolVersion = 1

// Names of the streams, buckets and the priority group that Setup creates.
const (
	// EventStream holds every session's event log.
	EventStream = "TAH_EVT"
	// InputStream is the work queue of inputs and commands.
	InputStream = "TAH_IN"
	// CheckpointBucket is the KV bucket of state snapshots.
	CheckpointBucket = "tah_checkpoints"
	// ToolResultBucket is the KV bucket where remote tool runners store results
	// by call id before replying.
	ToolResultBucket = "tah_tool_results"
	// NodeBucket is the KV bucket of node presence.
	NodeBucket = "tah_nodes"
	// ArtifactBucket is the object store of large outputs and files.
	ArtifactBucket = "tah_artifacts"
	// InputGroup is the priority group of the input partition consumers.
	InputGroup = "tah"
)

// Subjects and their patterns.
const (
	// EventSubjects is the subject filter of every event of every session.
	EventSubjects = "tah.sess.*.evt.>"
	// InputSubjects is the subject filter of inputs as clients publish them.
	InputSubjects = "tah.sess.*.in"
	// InputPartitionSubjects is the subject of inputs as TAH_IN stores them.
	InputPartitionSubjects = "tah.in.*.*"
	// DeltaSubjects is the subject filter of every session's token deltas.
	DeltaSubjects = "tah.sess.*.delta"
	// ErrorSubjects is the subject filter of every session's input errors.
	ErrorSubjects = "tah.sess.*.err"
)

// Headers that TAH sets on its messages.
const (
	// HeaderCommand names the command of an input: run, resume, cancel or compact.
	HeaderCommand = "Tah-Command"
	// HeaderEpoch is the ownership epoch of the writer of a delta.
	HeaderEpoch = "Tah-Epoch"
	// HeaderDeltaSeq numbers the deltas of one epoch from 1.
	HeaderDeltaSeq = "Tah-Delta-Seq"
	// HeaderReplyTo is an optional core NATS subject of an input where the owner
	// publishes the command's outcome when it ends (and where a malformed input
	// is reported besides tah.sess.<sid>.err).
	HeaderReplyTo = "Tah-Reply-To"
	// HeaderInputID names the input an error report is about.
	HeaderInputID = "Tah-Input-Id"
	// HeaderMsgID is NATS's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"

	hdrExpectLastSubjSeq  = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectLastSubjSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// EventSubject is the subject of an event of type t in session sid:
// tah.sess.<sid>.evt.<type>.
func EventSubject(sid string, t event.Type) string {
	return "tah.sess." + sid + ".evt." + string(t)
}

// SessionEventsFilter is the subject filter of every event of session sid:
// tah.sess.<sid>.evt.>. Fenced appends expect the last sequence over it.
func SessionEventsFilter(sid string) string { return "tah.sess." + sid + ".evt.>" }

// InputSubject is where clients publish inputs for session sid: tah.sess.<sid>.in.
func InputSubject(sid string) string { return "tah.sess." + sid + ".in" }

// PartitionSubject is the subject TAH_IN stores an input of session sid under,
// with p = Partition(sid, partitions): tah.in.<p>.<sid>.
func PartitionSubject(p int, sid string) string { return fmt.Sprintf("tah.in.%d.%s", p, sid) }

// partitionFilter is the filter of partition p's consumer: tah.in.<p>.*.
func partitionFilter(p int) string { return fmt.Sprintf("tah.in.%d.*", p) }

// partitionConsumer is the durable name of partition p's consumer.
func partitionConsumer(p int) string { return fmt.Sprintf("tah_in_%d", p) }

// DeltaSubject is the core NATS subject of session sid's token deltas.
func DeltaSubject(sid string) string { return "tah.sess." + sid + ".delta" }

// ErrorSubject is the core NATS subject where errors about session sid's inputs
// are reported.
func ErrorSubject(sid string) string { return "tah.sess." + sid + ".err" }

// Partition returns the input partition of session sid among n partitions, as
// the server's subject transform {{partition(n,1)}} computes it: the FNV-1a
// 32-bit hash of the session id, modulo n.
func Partition(sid string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(sid))
	return int(h.Sum32() % uint32(n))
}

// inputTransformDest is the subject transform destination of TAH_IN.
func inputTransformDest(partitions int) string {
	return fmt.Sprintf("tah.in.{{partition(%d,1)}}.{{wildcard(1)}}", partitions)
}

// sessionFromSubject returns the session token of a tah.sess.<sid>.… or
// tah.in.<p>.<sid> subject.
func sessionFromSubject(subj string) string {
	parts := strings.Split(subj, ".")
	switch {
	case len(parts) >= 3 && parts[0] == "tah" && parts[1] == "sess":
		return parts[2]
	case len(parts) == 4 && parts[0] == "tah" && parts[1] == "in":
		return parts[3]
	}
	return ""
}

// typeFromEventSubject returns the event type of a tah.sess.<sid>.evt.<type> subject.
func typeFromEventSubject(subj string) event.Type {
	parts := strings.SplitN(subj, ".", 5)
	if len(parts) == 5 && parts[3] == "evt" {
		return event.Type(parts[4])
	}
	return ""
}
