// Package bench measures TAH against the durable writes it cannot avoid:
// `make bench` runs it (cmd/tah-bench, a thin main over Config and Run),
// prints a table and writes docs/benchmarks.md and docs/benchmarks.json.
//
// Every figure sits beside a floor measured in the same run, on the same
// machine, because the machines it runs on are noisy: fenced appends
// (bus.SessionWriter.Append) of the very records a step wrote, of one record
// holding all of a step's events (the physical floor: one durable write of
// a step's bytes) and of records of one event; store.Apply of one step's
// records; a one-row SQLite transaction; the disk's write rate from many
// writers at once. The rows (issues 9 and 15):
//
//  1. the floors;
//  2. a step: one session, one turn of many tool steps, the mock answering
//     at once, a tool that does nothing; against one append of a record of
//     the step's events; the process's CPU per step, and the same with
//     tracing on (OTLP to a receiver in this process) against tracing off,
//     in turns that alternate the two;
//  3. throughput under load: many sessions, the mock answering after 50 ms,
//     five steps a turn; against the model-bound rate and the disk-bound
//     one (the disk's write rate over TAH's durable writes per step); the
//     read model's lag;
//  4. resume time against history length;
//  5. token delta latency to a subscriber in another process (this program,
//     started with DeltaSubscriberFlag);
//  6. resident memory per active and per passivated session;
//  7. failover: three nodes (R3, the default timings); one is killed while
//     its sessions' turns are in flight (a tah-node process sent SIGKILL, or
//     with KillShutdown an in-process node whose embedded server is shut
//     down at once), and the time until each turn, and each input sent then
//     to its idle sessions, makes its LLM call on a survivor is measured;
//  8. the peers: the same agent run by LangGraph.js with its SQLite
//     checkpointer (bench/peer/langgraph) and by Restate, a Virtual Object
//     per session (bench/peer/restate, in a network namespace of its own),
//     in the same run; then many sessions at once in TAH and in Restate;
//  9. the sharded log: appends/s of many sessions on three nodes (R3)
//     against one, the same work;
//  10. the step inspector's first render of its pages (package inspector);
//  11. a turn over the Synadia Agent Protocol (package agents, the gateway
//     tah-node runs): a caller's prompt to the ack, the first response
//     chunk and the terminator, against the model's own times and against
//     the same turn through client.Run;
//  12. tenants: the same turns by sessions of the default tenant, of one
//     tenant and of many (a hundred), each tenant with quotas that every
//     step checks and counts; a turn's time and the node's memory, many
//     tenants against one.
//
// Rows 1-3, 8 and 9 run under each durability setting: fsync on every write
// (bus.Config.SyncInterval 0, the default) and every 2 minutes (the NATS
// server's default).
//
// Each row (and each durability setting of rows 1-3) is a Scenario: Setup
// starts what it measures on, Run measures and adds its result to the
// Report, Teardown stops what Setup started; Run calls them in order, on a
// TB of the harness's (natstest.Run), so that what a scenario started stops
// with it even when it fails. The nodes are the cluster harness's (tahtest):
// one in-process node for rows 2 to 6, 8, 10, 11 and 12, three for rows 7 and 9. The
// sessions are driven as any client drives them, through package client
// (Create, Run and the Turn's outcome, Log), and row 11's also as a caller
// of the agent protocol (plain nats.go); only the floors and row 9's
// appends use the node's primitives (bus, store, SQLite) directly. Row 7 checks every session's log with
// projection.Audit.
//
// Sizes are Config fields (Default is the issue's, QuickSizes a smoke run's):
//
//	rep, err := bench.Run(ctx, bench.Default().QuickSizes(), os.Stderr)
//	if err != nil { ... }
//	fmt.Print(rep.Table())
//	err = rep.Write("docs", rep.Table()) // benchmarks.md and benchmarks.json
//
// The program runs itself again as sub-processes: as row 5's subscriber
// (DeltaSubscriber) and as row 7's victim, a tah-node (NodeFlag), so
// Config.Executable must be a main that understands those flags: cmd/tah-bench.
package bench
