// Package node wires one TAH node together: the bus (an embedded NATS server
// or a connection to a cluster), the SQLite read model and the projector that
// feeds it from every shard of the log exactly once, the session actors, the input consumers
// that hand each session's inputs to its actor, and the request/reply API
// service ("tah", endpoints under tah.api.; with an embedded server, the
// credentials API under tah.api.creds., creds.go).
//
// A node does not run tool calls itself: it hands the session actors'
// Manager a session.ToolConfig (its tools, the tool services' registry when
// Options.RemoteTools is set, the executor's options, the node's bound on
// concurrent calls, and its metrics as the observer), and the Manager's own
// tool runner executes the calls the sessions make.
//
// The smallest use:
//
//	n, err := node.Start(ctx, node.Options{Bus: busCfg, Provider: provider, Tools: registry})
//	...
//	defer n.Close(ctx)
//
// Inputs are acknowledged only when the work they ask for has ended; a node
// that stops (or loses a session to another node) leaves them unacknowledged,
// so the session's next owner gets them again and resumes from the log.
//
// # A cluster
//
// Nodes on one NATS (embedded servers joined by routes, or an external
// cluster) share the sessions with no coordinator but NATS (cluster.go): each
// publishes its presence on tah.nodes.<id>, every node computes the same
// balanced share-out of the input partitions over the live nodes (Assign) and
// pulls its own; the server's pinned consumers deliver a partition to one node
// at a time while nodes disagree. A share that shrinks is handed over (stop
// pulling, stop those sessions, unpin); a node that stops says it leaves; a
// node not heard of for bus.Config.NodeTTL is dead and its partitions move; a
// node that does not hear itself, or hears no other node while JetStream is
// not writable for twice the TTL, stops its sessions (it is about to be
// replaced); and a
// session.claimed with a newer epoch, seen by the projector, stops a stale
// actor at once. The log's
// fencing makes all of it safe: a node that lost a session cannot write to it.
// docs/operations.md says how to run one.
//
// # Faults of the disk
//
// Health (/healthz) says when the node cannot write: its embedded server's
// JetStream store failed a write (a full disk: the bus starts JetStream again
// once the disk takes writes, bus.Bus.StoreErr), or its read model fails its
// batches. A read model found damaged, at start (the store's integrity
// check) or by a read or write, is set aside and rebuilt from the log (the
// projector's reset); one that cannot be written is refused at start. What
// the node cannot get over by itself is sent on Failed, for the program to
// stop it (tah-node exits, for a supervisor to start it again).
package node
