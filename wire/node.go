package wire

import "time"

// NodeRecord is a node's presence: published on NodeSubject every fifth of
// the node TTL (a node not heard of for the node TTL is dead, and the others
// share its partitions out) and kept, for status and for nodes starting, in
// the KV bucket tah_nodes under the node id. A node that stops gracefully
// says so (Leaving) and deletes its entry.
// ShareOutByShard is NodeRecord.ShareOut of a node that shares the
// partitions of a shard of the log out together, a worker taking more than
// a node with a read model.
const ShareOutByShard = 2

type NodeRecord struct {
	// Node is the node's id (the key), as recorded in session.claimed.
	Node string `json:"node"`
	// Started is when the node started; Heartbeat when it wrote this record.
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// Partitions are the input partitions the node pulls: its share of the
	// sessions. Sorted.
	Partitions []int `json:"partitions"`
	// ActiveSessions is the number of session actors alive on the node.
	ActiveSessions int `json:"active_sessions"`
	// NATS is the client URL of the node's embedded server, or of the external
	// server it uses.
	NATS string `json:"nats,omitempty"`
	// NATSServer and NATSServerID name the NATS server the node's presence
	// connection is on (its embedded server, or one of an external cluster),
	// and NATSClientID is that connection's client id there: the others match
	// a server's disconnect advisory (DisconnectAdvisories), or the loss of
	// their routes to that server, to the node by them. A node that
	// reconnects to another server publishes its presence with the new ones
	// at once. Empty before the node's first connection is up, and in the
	// records of nodes older than these fields.
	NATSServer   string `json:"nats_server,omitempty"`
	NATSServerID string `json:"nats_server_id,omitempty"`
	NATSClientID uint64 `json:"nats_client_id,omitempty"`
	// Provider names the node's LLM provider.
	Provider string `json:"provider,omitempty"`
	// Worker is set when the node holds no read model (the setting
	// read_model=false): the nodes then give it a larger share of the
	// partitions than a node that folds the cluster's steps into its read
	// model. Absent in the records of nodes older than this field.
	Worker bool `json:"worker,omitempty"`
	// ShareOut is how the node shares the partitions out: ShareOutByShard,
	// or absent for nodes older than it (a partition at a time, equal
	// shares). The nodes share by the oldest way among them, so that during
	// a rolling upgrade all of them compute the same share-out.
	ShareOut int `json:"share_out,omitempty"`
	// Fenced is set while the node has lost touch with NATS for longer than the
	// node TTL and has stopped its sessions.
	Fenced bool `json:"fenced,omitempty"`
	// Leaving is set on the last presence a node publishes when it stops
	// gracefully (never stored in the bucket): the others take its partitions
	// at once.
	Leaving bool `json:"leaving,omitempty"`
}

// ClaimNotice is the body of a message on ClaimNoticeSubject(node): the node
// that claimed a session (session.claimed, fenced) tells the node whose claim
// was the last before its own, so that an actor of the session still alive
// there, now stale, stops at once (its LLM and tool calls cancelled) without
// waiting for an append of its own to fail. Only nodes publish and receive
// it. A notice that is lost costs nothing but that wait: the stale actor's
// appends are fenced, and a node that holds a read model hears the claim
// from the log as well.
type ClaimNotice struct {
	// Session is the session claimed.
	Session string `json:"session"`
	// Epoch is the epoch of the new claim: an actor of the session with an
	// older epoch is stale.
	Epoch uint64 `json:"epoch"`
	// Node is the node that claimed it.
	Node string `json:"node,omitempty"`
}
