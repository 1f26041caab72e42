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
//     message, so the requesting actor keeps receiving while its tools run.
//   - Stopping the runner cancels every call; the results of the batches it held
//     are still sent (with code "cancelled").
//   - Call ids are the model's; Cancel cancels every running call with that id.
//
// The smallest use, from a session actor that spawned the runner as its child:
//
//	// in Started:
//	s.runner = ctx.Spawn(toolrunner.Props(toolrunner.Config{Executor: exec}))
//	// after llm.completed, with tool.started appended for each call:
//	ctx.Request(s.runner, &toolrunner.ExecuteBatch{ID: stepID, Session: sid, Calls: resp.ToolCalls})
//	// later, in Receive:
//	case *toolrunner.BatchResult:
//		for _, r := range m.Results { /* append tool.finished for r.Call.ID with r.Result */ }
//	// on cancel:
//	ctx.Send(s.runner, &toolrunner.CancelAll{})
//
// Outside actors, Spawn returns a Runner handle whose Execute waits for the result.
package toolrunner
