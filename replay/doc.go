// Package replay re-runs a recorded session against today's code and an
// agent definition, with no model call and no tool run: it tells whether,
// and where, the agent that the definition and this build make departs
// from the recorded run.
//
// The log holds everything a replay needs. Run folds the session's events
// twice, side by side: as they were recorded, and as today's definition
// restates them (every session.created and session.claimed carries the
// definition's configuration instead of the recorded one, so that its
// system prompt, model and context budget are those in force, as a claim's
// are for a live session). The model's answers, the tool results, the
// people's approvals, steers, cancels and compactions are the log's: they
// are folded as recorded, so nothing is asked of a model or a tool. At
// every recorded LLM step, Run compares the request the recording sent
// (rebuilt from the log and checked against its recorded hash:
// projection.RebuildStarted) with the request that today's loop would send
// from the replayed state (projection.NextRequest with the definition's
// tools). It also checks the loop's decisions that the log records: an
// automatic compaction before a turn's first step, and the end of a turn
// at maxSteps. It stops at the first divergence and reports where (the
// turn, the step, the record) and what differs: which message (its index
// and role), which tool schema, which setting, and both hashes.
//
// What replay does not check: the requests of compaction calls (the log
// keeps no hash of them), which calls today's approval policy would hold
// for approval, budgets (their time limits depend on the clock), and the
// sessions of sub-agents (replay each child on its own: its definition is
// its sub-agent's).
//
// The smallest use:
//
//	def := replay.Definition{Config: event.Config{SystemPrompt: "You are terse.", MaxSteps: 20}, Tools: tools}
//	r, err := replay.Run(events, def, replay.Options{})
//	if r.Divergence != nil {
//		fmt.Print(r.Divergence.Text())
//	}
//
// A node serves it as tah.api.replay, with the node's own definition
// (session.Definition) and the request's changes to it; tahctl replay
// prints its report.
package replay
