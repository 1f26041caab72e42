// Package clustertest holds the multi-process tests of a TAH cluster: real
// tah-node processes, each embedding a NATS server joined to the others by
// routes (R3 streams), driven over NATS as any client would drive them.
//
// The cluster is package tahtest's, in Process mode: cmd/node is built once
// for the test binary (with -race when the test binary has it, so that a data
// race in a node fails the test too; TestMain calls tahtest.Main, which
// removes it); each test starts its own three nodes on free ports, each with
// its own data directory, the shared trust material (one NATS operator and
// TAH account) and the mock model in demo mode: every turn calls
// list_files, then read_file on the tools root's README, then streams an
// answer token by token at a slow pace, so that turns are in flight long
// enough to be interrupted. The demo is a pure function of the request, so a
// turn resumed on another node makes the same calls it would have made on the
// first.
//
// The tests:
//
//   - TestSessionsSpread: sessions are spread over the three nodes, and
//     tah_nodes holds a balanced, disjoint assignment of the 16 partitions.
//   - TestKillMidTurn: kill -9 of a node while turns run on it; every turn
//     ends exactly once on the surviving nodes, no completed tool runs again.
//   - TestRollingRestart: SIGTERM and restart of each node in turn under
//     continuous traffic; no input is lost or run twice.
//   - TestToolServiceSurvivesNodeCrashes: one node, with a tool service
//     connected through it, killed with SIGKILL and restarted four times
//     while 20 sessions' turns call the service's non-idempotent tool: no
//     call of an offered tool is answered unknown_tool or
//     tool_unavailable, none runs twice, every turn ends once and every
//     started call has its result (discovery driven by events alone).
//   - TestIndependentToolServiceAfterNodeCrashes: the same with a tool
//     service written from docs/protocol.md alone (nats.go's micro
//     package), which reconnects only after the restarted node is up and
//     has looked for it: the sessions whose last request offered its tool
//     wait for it, whether a call was running or their next turn came
//     first, and no call ends unknown_tool or tool_unavailable or runs
//     twice.
//   - TestKilledTurnStaysInItsTrace: the nodes trace to an OTLP receiver in
//     the test; a turn sent with a client's traceparent has its node killed
//     with SIGKILL mid-answer, and the survivor's spans of the resumed turn
//     are in the client's trace, the children of the span turn.started
//     recorded, with a tah.turn.continued event saying where and why.
//   - TestAgentStreamSurvivesKill: an agent protocol caller, connected to a
//     node that survives, prompts a session whose owner is killed with
//     SIGKILL mid-answer: its stream goes on with "restarted", the whole
//     answer as the log records it, and the terminator, with nothing after.
//   - TestSubAgentParentOwnerKilled, TestSubAgentChildOwnerKilled: a parent
//     session calls two sub-agents at once (the mock scripted, the parent
//     and its children on three nodes); the node of the parent, or of one
//     child, is killed with SIGKILL while the children answer. The parent's
//     turn finishes on a survivor with both answers; each child ran one turn
//     (never spawned twice) and each call has one result.
//
// They assert what the logs say (projection.Audit of each session's log),
// never timings: every wait is a poll with a generous bound. A failing test
// prints the nodes' logs. They are skipped in -short mode and take about four
// minutes.
//
// Run: go test -count=1 ./internal/clustertest/ (and with -race). Set
// TAHTEST_KEEP=1 to keep the nodes' data directories and logs.
package clustertest
