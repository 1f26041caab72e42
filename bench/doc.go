// Command tah-bench measures TAH against the durable writes it cannot avoid:
// `make bench` runs it, prints a table and writes docs/benchmarks.md and
// docs/benchmarks.json.
//
// Every figure sits beside a floor measured in the same run, on the same
// machine, because the machines it runs on are noisy: raw fenced appends of
// the very events a step writes (bus.SessionWriter.Append), store.Apply of one
// step's events, a one-row SQLite transaction. The rows are those of issue 9:
//
//  1. the floor;
//  2. overhead per step: one session, one turn of many tool steps, the mock
//     answering at once, a tool that does nothing;
//  3. throughput under load: many sessions, the mock answering after 50 ms,
//     five steps a turn;
//  4. resume time against history length;
//  5. token delta latency to a subscriber in another process (this binary,
//     started with -delta-subscriber);
//  6. resident memory per active and per passivated session;
//  7. failover: three nodes in this process (R3, the default timings); one
//     is killed while its sessions' turns are in flight (its embedded server
//     shut down at once; with -failover-kill process, a process of its own
//     sent SIGKILL), and the time until each turn, and each input sent then
//     to its idle sessions, makes its LLM call on a survivor is measured;
//  8. rows 1-3 under both durability settings: fsync on every write
//     (bus.Config.SyncInterval 0, the default) and every 2 minutes (the
//     NATS server's default).
//
// Everything runs in this process on real parts (row 7's victim may run in a
// process of its own): an embedded nats-server with a temporary store (port
// -1), the node (node.Start: projector, SQLite read model, session actors,
// tool runner, input consumers) and llm/mock.
// Sizes are flags (see -h); -quick shrinks them all for a smoke run.
//
//	go run ./bench -out docs          # the full run, about 6 minutes on 2 cores
//	go run ./bench -quick -out ""     # a smoke run, table on stdout only
package main
