package session

import (
	"context"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// modelCall is a step's LLM call, made while the step's llm.started is being
// written. An LLM call changes nothing outside TAH, so it need not wait for
// the write; what must wait is everything that makes its answer seen: the
// call's deltas are held until the write is acknowledged (answer), so that a
// client never sees a step's tokens before its llm.started is in the log,
// and the answer is folded only after it. When the write fails (fenced, the
// node stopping), drop cancels the call and its answer is never used: the
// step is asked again by whoever owns the session next, as after a crash
// during the call. The call's goroutine is owned by the step: answer and
// drop both wait for it to end.
type modelCall struct {
	a      *AgentContext
	ctx    context.Context
	stepID string
	cancel context.CancelFunc

	// written is closed once llm.started is in the log (answer), dropped
	// when it will never be (drop); done when the goroutine has ended.
	written, dropped, done chan struct{}

	// Owned by the goroutine until done is closed.
	held    []llm.Delta // deltas that came before written
	flowing bool        // held went out: deltas go out as they come
	resp    llm.Response
	err     error
	took    int64 // the call's time, in ms
}

// askModel starts req's call on a goroutine of its own (one the Manager
// keeps, a.calls, so that each call does not grow a new goroutine's stack
// again on its way into the provider); every call is followed by exactly
// one answer or drop.
func askModel(ctx context.Context, a *AgentContext, stepID string, req llm.Request, span trace.Span) *modelCall {
	cctx, cancel := context.WithCancel(llm.WithMemo(ctx, &a.memo))
	c := &modelCall{a: a, ctx: ctx, stepID: stepID, cancel: cancel,
		written: make(chan struct{}), dropped: make(chan struct{}), done: make(chan struct{})}
	a.spawn(func() {
		defer close(c.done)
		begin := a.now()
		first := true
		c.resp, c.err = llm.Run(cctx, a.Provider, req, func(d llm.Delta) {
			if first && span.IsRecording() {
				first = false
				span.SetAttributes(telemetry.KeyTTFT.Int64(a.now().Sub(begin).Milliseconds()))
			}
			c.deliver(d)
		})
		c.took = a.now().Sub(begin).Milliseconds()
		// Deltas still held go out once the step's start is written.
		select {
		case <-c.written:
			c.flow()
		case <-c.dropped:
		}
	})
	return c
}

// deliver publishes d, or holds it while llm.started is not written yet.
func (c *modelCall) deliver(d llm.Delta) {
	if !c.flowing {
		select {
		case <-c.written:
			c.flow()
		default:
			c.held = append(c.held, d)
			return
		}
	}
	c.a.Delta(c.ctx, c.stepID, d)
}

// flow publishes the held deltas, in order, and lets the next ones through.
func (c *modelCall) flow() {
	if c.flowing {
		return
	}
	c.flowing = true
	for _, d := range c.held {
		c.a.Delta(c.ctx, c.stepID, d)
	}
	c.held = nil
}

// answer is called once llm.started is written: it lets the deltas out, waits
// for the call, and returns its answer and its time in ms.
func (c *modelCall) answer() (llm.Response, int64, error) {
	close(c.written)
	<-c.done
	c.cancel()
	return c.resp, c.took, c.err
}

// drop cancels the call, whose step's start could not be written, and waits
// for its end; nothing it produced is published.
func (c *modelCall) drop() {
	close(c.dropped)
	c.cancel()
	<-c.done
}
