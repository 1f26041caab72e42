// Package toolrunner runs the tool calls of a session in protoactor-go actors.
//
// A runner actor executes batches of tool calls (the calls of one model
// response) through a tools.Executor, which validates input, applies timeouts,
// recovers panics and turns every failure into a failed result. The runner adds:
//
//   - concurrency: the calls of a batch run at the same time, except that a call
//     whose tool is exclusive (tools.ExclusiveTool) runs alone, after the calls
//     before it and before the calls after it;
//   - a bound: at most Config.MaxConcurrent calls run at once in one runner, and
//     a Limiter shared between runners can bound a whole node;
//   - cancellation that reaches the tool's context at once: Cancel (one call),
//     CancelBatch, CancelAll, and stopping the actor;
//   - a per-batch deadline (ExecuteBatch.Deadline) on top of each tool's timeout.
//
// The contract:
//
//   - Send ExecuteBatch with ctx.Request (or set ReplyTo); a batch sent with
//     plain Send and no ReplyTo is dropped with a warning.
//   - Exactly one *BatchResult answers each ExecuteBatch, with one CallResult per
//     call, in call order, whatever happened: cancelled, timed-out, unknown and
//     panicking calls have failed results with an event.Code* code. Record the
//     tool.finished events in that order.
//   - The runner never blocks in Receive: each batch runs in a goroutine that the
//     runner owns and cancels when it stops. The BatchResult is delivered as a
//     message, so the requesting actor keeps receiving while its tools run
//     (a Runner handle's caller gets it on a channel instead).
//   - The runner's goroutines, its mailbox's included, come from a pool of its
//     own that keeps them for a while after their work (internal/gopool): a new
//     goroutine's stack growth was a third of what a call to a tool that does
//     nothing cost (BenchmarkExecute). Stop ends them.
//   - Stopping the runner cancels every call; the results of the batches it held
//     are still sent (with code "cancelled").
//   - Call ids are the model's; Cancel cancels every running call with that id.
//   - A CallResult says where its call ran (Runner: "local", or
//     "remote:tah-tool-<name>" for a tool service's tool) and how long; each
//     is shown to Config.Observe as soon as its call ends.
//
// The session actors' Manager (actors/session) spawns one runner beside its
// session actors, with Spawn, and a session's work goroutine waits on
// Runner.Execute; cancelling the work's context cancels the batch:
//
//	r, err := toolrunner.Spawn(sys.Root, toolrunner.Config{Executor: exec, MaxConcurrent: 8,
//		Observe: func(cr toolrunner.CallResult) { /* count it */ }})
//	res, err := r.Execute(ctx, toolrunner.ExecuteBatch{Session: sid, Calls: resp.ToolCalls})
//	for _, cr := range res.Results { /* append tool.finished for cr.Call with cr.Result */ }
//	err = r.Stop(ctx) // after the sessions: cancels what is left
//
// An actor that wants the result as a message spawns the runner as its child
// (Props) and sends ExecuteBatch with ctx.Request; the *BatchResult comes back
// to its Receive.
package toolrunner
