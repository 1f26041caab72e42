package wire

import (
	"strconv"
	"time"
)

// Streams, buckets and groups.
const (
	// EventStreamPrefix starts the name of every shard of the event log:
	// TAH_EVT_<k> (EventShardStream).
	EventStreamPrefix = "TAH_EVT_"
	// LegacyEventStream is the one stream of the event log before shards and
	// records (log schema version 1); a node migrates it into the shards when
	// it starts, then removes it.
	LegacyEventStream = "TAH_EVT"
	// LockBucket is the KV bucket of the log migration's lock (LogMigrationLock):
	// it exists only while a node migrates a LegacyEventStream.
	LockBucket = "tah_locks"
	// LogMigrationLock is the key of LockBucket that the node migrating the
	// log holds (its value is the node's name), refreshed within LockTTL.
	LogMigrationLock = "log-v2"
	// InputStream is the work queue of inputs and commands.
	InputStream = "TAH_IN"
	// TenantInputStream keeps the inputs clients publish naming their
	// sender, for tenants' sessions (TenantInputSubjects) and the default
	// tenant's (NamedInputSubjects), until InputStream, which sources it,
	// has them in their partitions: a stream has one subject transform,
	// InputStream's being the default tenant's unnamed inputs'. Kept
	// TenantInputMaxAge.
	TenantInputStream = "TAH_TIN"
	// CheckpointBucket is the KV bucket of state snapshots, keyed by session id.
	CheckpointBucket = "tah_checkpoints"
	// ToolResultBucket is the KV bucket where tool services store calls
	// (StoredCall) under ResultKey before they reply.
	ToolResultBucket = "tah_tool_results"
	// NodeBucket is the KV bucket of node presence (NodeRecord), keyed by node id.
	NodeBucket = "tah_nodes"
	// ArtifactBucket is the object store of large outputs and files.
	ArtifactBucket = "tah_artifacts"

	// InputGroup is the priority group of the input partition consumers.
	InputGroup = "tah"
	// APIService is the name of the micro service of the API.
	APIService = "tah"
	// APIQueueGroup is the queue group of the API's endpoints: any node answers.
	APIQueueGroup = "tah-api"
	// ToolQueueGroup is the queue group of every tool endpoint, so that the
	// instances of a tool service share its calls.
	ToolQueueGroup = "tah-tools"
	// ToolServicePrefix starts the conventional name of a tool service:
	// tah-tool-<name>.
	ToolServicePrefix = "tah-tool-"
)

// Metadata keys. The Meta* keys of streams are set by nodes on the event
// log's shards and TAH_IN (MetaShards on the shards, MetaPartitions on
// TAH_IN); MetaToolProtocol is service metadata of a tool service, and the
// MetaTool* keys are endpoint metadata of a tool (micro metadata values are
// strings).
const (
	MetaSetup      = "tah.setup"
	MetaProtocol   = "tah.protocol"
	MetaPartitions = "tah.partitions"
	MetaShards     = "tah.shards"

	MetaToolProtocol   = "tah_protocol"
	MetaToolDesc       = "description"
	MetaToolSchema     = "schema"     // the input's JSON Schema, as JSON text
	MetaToolIdempotent = "idempotent" // "true" or "false"
	MetaToolExclusive  = "exclusive"  // "true" or "false"
	MetaToolTimeoutMS  = "timeout_ms" // the tool's own time limit in milliseconds
	// MetaToolApproval is "always" when the tool's calls wait for a person's
	// approval unless the node's approval policy names the tool (an MCP
	// tool that is not read-only); absent otherwise.
	MetaToolApproval = "approval"
)

// Durations of the contract.
const (
	// DuplicateWindow is how long the streams remember Nats-Msg-Id: a publish
	// retried within it is stored once.
	DuplicateWindow = 2 * time.Minute
	// TenantInputMaxAge is how long TenantInputStream keeps an input: the
	// input stream sources it within moments, and resumes where it stopped
	// after an outage of up to this long.
	TenantInputMaxAge = 24 * time.Hour
	// ToolResultTTL is the max age of the tool result bucket when a tool
	// service creates it.
	ToolResultTTL = 24 * time.Hour
	// LockTTL is how long a lock of LockBucket lives without being refreshed:
	// a node that died holding it lets another take over after that.
	LockTTL = 30 * time.Second
)

// DefaultShards is the number of shards of an event log created without
// another count (bus.Config.Shards). The count is fixed when the log is
// created.
const DefaultShards = 8

// EventShardStream is the name of shard k of the event log: TAH_EVT_<k>.
func EventShardStream(k int) string { return EventStreamPrefix + strconv.Itoa(k) }
