// Package projection holds the pure functions of a session's history: folding its
// events into the session's state, and deriving from that state what is sent to the
// model.
//
// Everything here is as pure as a raft FSM's Apply: no context, clock, I/O or
// randomness, so that any node folding the same log reaches the same state, and
// every function can be tested exhaustively and fuzzed for its invariants.
//
//   - Apply / Fold: events → State (messages, steps, tool calls, artifacts,
//     checkpoints, status, turns, usage). A State is also the checkpoint snapshot:
//     folding a snapshot and then the tail equals folding everything, in all a
//     writer reads of it. A snapshot holds a window of the history (Elided,
//     Elide, Slim): the turns no request can send any more are left out, and
//     NextRequest still gives the whole history's request, byte for byte.
//   - ApplyLog / FoldLog: the same, strictly, as a session's owner reads its log
//     back: the first event it cannot fold, or that no owner wrote (its epoch is
//     not the last claim's), is the session's Fault (corrupt_log), and nothing
//     after it is folded; RecordFault classifies a record that cannot be read
//     (corrupt_log, or needs_newer_node for a newer log schema).
//   - ProjectContext: the specification's context trimming (v0.22), three rules in
//     order, never separating a tool call from its result.
//   - ApplySummary: the newest "[Summary of the earlier conversation]" merged into
//     the leading system message; nothing before it is sent.
//   - NextRequest / RebuildRequest: the request of an LLM step, and what
//     llm.started records of it (a reference and a hash, never the messages);
//     from the log, the same request byte for byte.
//   - PlanCompaction: the input and prompt of a compaction (0.31).
//   - DanglingCalls / Repair: "not executed" results for calls that never finished.
//   - ForkMessages: the first N turns of a history, for fork.
//   - ReplaceSystemPrompt: the current configuration's system prompt wins.
//   - Audit: a log's claims and turns, and every invariant of a log it breaks
//     (for the tests and benchmarks of crashes and failovers).
//
// The smallest use:
//
//	st, err := projection.Fold(events)
//	msgs, report := projection.ProjectContext(projection.ApplySummary(st.Messages), 8000)
//	r, err := projection.RebuildRequest(events, "llm1.3") // r.Request, r.Verified
package projection
