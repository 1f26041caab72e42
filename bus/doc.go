// Package bus is the node's side of NATS: the embedded server (or the
// connection to an external one), the streams, consumers and buckets, the
// fenced append to a session's event log, replay and live tails, token deltas,
// the input partitions, and the object store for large outputs. The wire
// contract it implements is docs/protocol.md; its names, subjects, headers and
// payloads are package wire's (clients use package client, which shares with
// bus only internal/natsx: the classifier of temporary unavailability, the
// retrying publish and the input message).
//
// The smallest use:
//
//	cfg := bus.Default()             // embedded server on 127.0.0.1:4222, data in .tah
//	b, err := bus.Open(ctx, cfg)     // starts the server, sets up the streams
//	if err != nil { ... }
//	defer b.Close(ctx)
//
//	evs, last, err := b.Replay(ctx, sid, 0) // the session's log
//	w, err := b.Writer(sid, epoch, last)     // this owner's fenced writer
//	seqs, err := w.Append(ctx, ev1, ev2)     // one record; errors.Is(err, bus.ErrFenced): ownership lost
//
// # Server and connection
//
// With Config.URL empty, Open embeds a nats-server with JetStream, storing
// under Config.DataDir/nats and listening on Config.Host:Port (127.0.0.1 by
// default) for other processes; the Bus itself uses in-process connections.
// Every write is fsynced before it is acknowledged (SyncAlways) unless
// Config.SyncInterval relaxes it: NATS's own default fsyncs every two minutes,
// and Jepsen's analysis of NATS 2.12.1 lost acknowledged writes that way.
// Credentials (user and password, or a token) are required from every client
// when set. Config.Cluster joins embedded servers by routes for R3. With
// Config.URL set, the same code connects to an external server or cluster.
// Open waits for JetStream (a cluster's meta leader) within
// Config.ReadyTimeout; Close stops what the Bus started, drains the connections
// and shuts the server down: an acknowledged append is already on disk.
//
// One connection serialises what is sent on it, so the appends do not share
// the main one: shard k's appends (single or batched) and its sessions' deltas
// go on connection k mod Config.Conns of a pool, the tails and the node's
// presence on one each of their own (PresenceConn), and the control traffic
// (requests, KV, input consumers, subscriptions) stays on Conn();
// Config.Conns 1 keeps a single connection (pool.go).
//
// # Setup
//
// Open creates or updates the shards of the event log (streams TAH_EVT_0 to
// TAH_EVT_<n-1>), TAH_IN, one durable consumer per input partition, the KV
// buckets tah_checkpoints, tah_tool_results and tah_nodes, and the object
// store tah_artifacts (through artifacts.Ensure, the one set-up of that
// bucket). It is idempotent (nodes starting together race
// harmlessly; a step that times out on a forming cluster is retried) and
// versioned: the streams carry the metadata tah.setup=wire.SetupVersion and
// tah.protocol=wire.ProtocolVersion, the shards tah.shards (their count) and
// TAH_IN tah.partitions. A stream of a newer setup version, or not made by
// TAH, stops Open with ErrIncompatibleSetup and what to do; an older or
// different one is updated in place when NATS allows it (subjects, replicas,
// transform, partition count while no input is pending), and otherwise Open
// says how to migrate. The shard count is fixed when the log is created
// (Config.Shards, or wire.DefaultShards): a node configured with another one
// is refused, one configured with 0 takes the log's. Config.NoSetup only
// checks, for clients that may not manage streams.
//
// A log written before shards and records (one stream, TAH_EVT, an event per
// message on tah.sess.<sid>.evt.<type>) is migrated by Open, before it
// returns: the node that creates the key log-v2 of the KV bucket tah_locks
// (refreshed every ten seconds, expiring after wire.LockTTL) seals TAH_EVT,
// copies every session's events in order into its shard, each as a record of
// one event with the message id "<sid>:v1:<nonce>:<old sequence>", drops the
// checkpoints (they counted the old sequences), removes TAH_EVT and the lock
// bucket; it logs its progress every five seconds. The other nodes wait until
// TAH_EVT is gone, and take the lock over if it expires. An interrupted
// migration resumes each session after its last copied event (the message
// id says which), and the copies are fenced like appends, so a second
// migrator cannot copy an event twice.
//
// # Appending
//
// A session's records are in one shard, wire.Shard(sid, n) (FNV-1a of the id
// modulo the shard count), on one subject, tah.evt.<k>.<sid>: streams per
// session would each be a Raft group on a cluster, and shards give appends of
// different sessions as many Raft leaders (and fsync queues) as there are
// shards. No stream has MaxMsgsPerSubject, which would silently drop
// records. An Append is one record (event.Record: the events of the call, in
// one message, all or none) published with Nats-Expected-Last-Subject-Sequence
// set to the writer's last sequence of that subject: a writer that is not the
// current owner gets API error 10071 ("wrong last sequence: <seq>"), returned
// as ErrFenced. A replicated stream answers 10164 instead while another append
// of the session is still being applied (even the writer's own previous one,
// just acknowledged): not a fence, the writer tries again until the answer
// is 10071 or the record lands. The Nats-Msg-Id is "<sid>:<epoch>:<writer
// nonce>:<expected last sequence>": unique to one writer and one position, so
// that a duplicate can only ever be the writer's own retry (a per-writer
// random nonce, not only a counter, because two writers of the same epoch —
// two creators of a session, or an owner that reopened its writer — must never
// dedupe into each other).
// A record, headers included, must fit the server's max payload
// (MaxRecordSize is the largest body always accepted).
//
// A lost acknowledgement (timeout, no responders, reconnect) is resolved by
// reading the session's last message from the shard's leader: if its
// Nats-Msg-Id is ours, the record landed; if it is someone else's after our
// expected sequence, we are fenced; otherwise the same message is retried,
// which the server answers "wrong last sequence" (R1) or as a duplicate (R3)
// if the first attempt landed in the meantime — both resolved the same way.
// When the context ends before the log can tell, Append returns
// ErrOutcomeUnknown and the writer refuses further appends: replay and open a
// new one.
//
// On R3, a retry overlapping a leader change could in principle be stored
// twice (the cluster checks ids and sequences on the leader before proposing,
// not when applying). Once, under -race, a writer was refused after a leader
// change with the log holding something after its own last event; 40 further
// runs of the leader-change test did not reproduce it. Defensively: a writer
// refused because the session's last message is its own (its message id has
// the writer's prefix) carries on after it rather than calling itself fenced,
// and Replay and the tails drop a message whose Nats-Msg-Id repeats the
// previous one of its session (TestStoredDuplicate makes such a copy). One
// append is in flight per SessionWriter (R3 rejects pipelined fenced
// appends); sessions append in parallel. Atomic batch publish is not used: it
// stages each batch on disk on R1 and was measured 25 times slower; a record
// is atomic by being one message.
//
// To claim a session that an old owner may still be writing, append the claim
// at LastSeq (one round trip per attempt, retried while fenced) and replay up
// to it afterwards: replaying first can lose the race to a busy old owner over
// and over (the two-writer test livelocked that way).
//
// # Replay
//
// Replay reads a session's records from its shard with batched direct gets
// ($JS.API.DIRECT.GET.TAH_EVT_<k> with next_by_subj, batch and max_bytes;
// nats.go v1.55 has no API for it, so the requests are made by hand, with
// their replies routed by one shared wildcard inbox subscription) and returns
// their events, each with its record's Seq and its Index in it (a version-1
// message of a log migrated from TAH_EVT is a record of one event). Direct
// gets were measured against an ephemeral filtered consumer (what an ordered
// consumer is on the server), reading one session's 100 events interleaved
// with 1,000 other sessions (10,100 messages in one stream), on a shared
// 2-core VM, R1 file store (BenchmarkReplay, before shards; two runs, the
// machine busy and quiet):
//
//	                       direct get         consumer
//	all 100 events         3.6 / 1.4 ms       4.4 / 1.5 ms
//	last 10 (a checkpoint) 0.6 / 0.25 ms      1.1 / 0.55 ms
//
// so Replay uses direct gets: no consumer to create and delete. Its cost
// grows with how interleaved the shard is: resume from checkpoints. On a
// replicated stream a direct get may be answered by a lagging replica, so
// Replay confirms the last sequence with the shard's leader and reads on
// until it has it.
//
// For comparison on the same VM (BenchmarkAppend): one fenced append is about
// 0.9-1.3 ms with SyncAlways (this VM's fsync) and 50 µs with a one-second
// sync interval.
//
// # Tails
//
// Tail watches one session from a sequence of its shard on, TailAll every
// session of every shard, each shard from a sequence of its own: both are
// ordered consumers (one per shard) starting at that sequence, so history
// and live records are one stream with no seam, and the client library
// recreates a consumer from the last delivered sequence after a gap or
// reconnect; a sequence at or below the last delivered one is never handed
// out twice. Tail hands out events; TailAll whole records with their shard,
// so that its user can keep a position per shard at record boundaries.
// TailAll is made of ordered consumers rather than durable ones because its
// user, the read model, stores the positions it applied in its own database,
// in the same transaction as the rows: that is the one place that can say
// where to restart, and no consumer state outlives a node.
//
// # Deltas
//
// Token deltas are core NATS messages on tah.sess.<sid>.delta with headers
// Tah-Epoch and Tah-Delta-Seq and a JSON body (wire.Delta: the llm.Delta and
// its step id). SubscribeDeltas drops the deltas of an epoch lower than the
// highest seen: they come from an owner that lost the session.
//
// # Input
//
// Clients publish inputs to tah.sess.<sid>.in with the header Tah-Command
// (run, resume, cancel, compact) and a wire.Input as JSON. TAH_IN is a work queue
// whose subject transform stores them as tah.in.<p>.<sid>, p = Partition(sid,
// P). Every node pulls every partition through durable consumers in priority
// group "tah" with the pinned policy, so each partition is served by one node
// at a time: the owner of its sessions. The handler gets an InputMsg to Ack
// when the work is done, KeepAlive (InProgress) while it runs, Nak, Term or
// Reject. A message that is not a valid input is terminated before any
// handler sees it and reported as a wire.Refusal on the core subject
// tah.sess.<sid>.err and its Tah-Reply-To header's (the stored message has
// no reply subject: JetStream used it for the publish acknowledgement), so
// it never blocks its partition.
// InputConsumer.Close unpins the partitions it holds so that another node
// takes them over at once.
//
// # Limits
//
// Session ids are checked with event.ValidSessionID (ErrInvalidSessionID). A
// record larger than the server's max payload is refused before it is sent,
// with ErrPayloadTooLarge naming both sizes; MaxRecordSize is the largest body
// always accepted. Large tool outputs go to the object store (PutArtifact,
// through tools/artifacts, the one artifact store; reads check the blob
// against its reference) and the event carries the event.ArtifactRef.
// Sessions keep their checkpoints through CheckpointStore: a snapshot of the
// state and the segments of the history its window leaves out.
package bus
