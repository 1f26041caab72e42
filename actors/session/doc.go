// Package session is the Session actor and the agent loop: the specification
// (../shared/spec/agent-session.en.md) made real on the durable log.
//
// A Manager owns one node's session actors (protoactor-go, one per session,
// named by its id). An actor is the only writer of its session's log: it loads
// the session from its checkpoint (a window of the history, the rest in
// segments: history.go) and the tail of its log, claims it with a new
// epoch (session.claimed, carrying the current configuration, which wins over
// the stored one), and runs each Command — run, resume, cancel, compact — in a
// work goroutine it owns, so that its Receive never blocks. The actor's
// parts are in files of their own: the mailbox (actor.go: Receive hands
// each message to a method, and the queue decides what runs next), the work
// of a command (work.go) and the load and checkpoint (load.go). Every step is
// appended, fenced, before the state moves on; a node that lost the session gets
// bus.ErrFenced on its next append and stops without writing again.
//
// Tool calls take one straight path. The Manager owns one tool runner
// (actors/toolrunner), spawned in its actor system beside the session actors
// and configured by a ToolConfig: the catalog of tools, the executor's
// options, the bound on concurrent calls, the finder of results tool services
// stored, and an observer (a node's metrics). One runner rather than one per
// session: the node's bound on concurrent calls is simply that runner's, a
// session's cancel reaches its calls through the work's context, and stopping
// it after the sessions is one step of Close, which keeps the shutdown's
// "cancelled" results out of the log. A session's work goroutine (never its
// actor) appends tool.started, naming where each call runs ("local" or
// "remote:tah-tool-<name>", from the catalog), hands the batch to the runner
// and waits for it; each toolrunner.CallResult becomes a tool.finished in one
// place, as do the results of calls settled without running (a stored remote
// result, "interrupted", "not executed").
//
// The loop is an interface (Loop); DefaultLoop is the specification's default
// loop with maxSteps, the context budget (trimming and automatic compaction once
// per turn: its model call is a step marked as compaction, in its one event,
// and an empty summary fails it so that trimming takes over) and streaming of
// token deltas. Every blob an event refers to (a large answer or output, a
// file a tool stored) is followed by its artifact.created, and every failed
// model or tool call is logged at warn, in AgentContext's one place where
// events are made. Resume follows ARCHITECTURE.md: an LLM
// step without a result is asked again, a tool step with a result is never run
// again, a running tool step is re-run only if its tool is idempotent and
// otherwise gets an "interrupted, outcome unknown" result. A node shutting down
// records nothing more, so the next owner resumes the turn.
//
// Budgets (budget.go) stop a turn that spends too much: the loop checks the
// limits in force (the node's Config.Budget, the session's own, the turn's
// own: the tightest wins) before each LLM call and after each step, and a
// time limit is also the turn's deadline. A turn that reaches one pairs its
// calls and fails with code budget_exceeded; the budget command records a
// change (budget.set), and a resume then reopens the turn (turn.reopened).
//
// A call that the approval policy (ToolConfig.Approval) names waits for a
// person: tool.approval-requested, and the work ends, holding no goroutine;
// the actor may passivate. An approve or deny command (an input like any
// other) records the decision and runs the turn on; the deadline, if any, is
// a timer of the Manager, armed again from the log by whichever node loads
// the session; a cancel answers every call and ends the turn (approval.go).
//
// The smallest use:
//
//	m, err := session.NewManager(session.Config{MaxSteps: 20}, b, provider,
//		session.ToolConfig{Catalog: tools.MustRegistry(builtin.ListFiles("."))}, nil)
//	defer m.Close(ctx)
//	session.Create(ctx, b, "s_1", session.Config{}, nil)
//	m.Deliver("s_1", &session.Command{Kind: wire.CommandRun,
//		Message: llm.User("analyse this project's directory structure"),
//		Done:    func(o session.Outcome) { fmt.Println(o.Status, o.Content) }})
package session
