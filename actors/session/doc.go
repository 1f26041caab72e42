// Package session is the Session actor and the agent loop: the specification
// (../shared/spec/agent-session.en.md) made real on the durable log.
//
// A Manager owns one node's session actors (protoactor-go, one per session,
// named by its id). An actor is the only writer of its session's log: it loads
// the session from its checkpoint and the tail of its log, claims it with a new
// epoch (session.claimed, carrying the current configuration, which wins over
// the stored one), and runs each Command — run, resume, cancel, compact — in a
// work goroutine it owns, so that its Receive never blocks. Every step is
// appended, fenced, before the state moves on; a node that lost the session gets
// bus.ErrFenced on its next append and stops without writing again.
//
// The loop is an interface (Loop); DefaultLoop is the specification's default
// loop with maxSteps, the context budget (trimming and automatic compaction once
// per turn) and streaming of token deltas. Resume follows ARCHITECTURE.md: an LLM
// step without a result is asked again, a tool step with a result is never run
// again, a running tool step is re-run only if its tool is idempotent and
// otherwise gets an "interrupted, outcome unknown" result. A node shutting down
// records nothing more, so the next owner resumes the turn.
//
// The smallest use:
//
//	m := session.NewManager(session.Config{MaxSteps: 20}, b, provider, tools, nil)
//	defer m.Close(ctx)
//	session.Create(ctx, b, "s_1", session.Config{}, nil)
//	m.Deliver("s_1", &session.Command{Kind: wire.CommandRun,
//		Message: llm.User("analyse this project's directory structure"),
//		Done:    func(o session.Outcome) { fmt.Println(o.Status, o.Content) }})
package session
