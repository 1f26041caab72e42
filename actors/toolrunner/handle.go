package toolrunner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/event"
)

// Runner is a handle on a runner actor spawned at the root, for callers that are
// not actors (the CLI, tests, a node's wiring). Actors use the messages instead.
type Runner struct {
	root *actor.RootContext
	pid  *actor.PID
	wg   *sync.WaitGroup
}

// Spawn starts a runner actor under root.
func Spawn(root *actor.RootContext, cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wg := new(sync.WaitGroup)
	pid := root.Spawn(props(cfg, wg))
	return &Runner{root: root, pid: pid, wg: wg}, nil
}

// PID is the runner actor's address.
func (r *Runner) PID() *actor.PID { return r.pid }

// Execute runs b and waits for its result. When ctx is done first, it cancels the
// batch and returns the result that follows (every call cancelled or timed out),
// so that a result always comes back; the error is set only when the runner is
// gone.
func (r *Runner) Execute(ctx context.Context, b ExecuteBatch) (*BatchResult, error) {
	return r.ExecuteNoting(ctx, b, 0, nil)
}

// ExecuteNoting is Execute that, with slow, calls slow once on the caller's
// goroutine if the batch is still running after the delay after, and then
// waits for it still (the session writes the calls' start then: a batch
// that ends sooner is written with its results).
func (r *Runner) ExecuteNoting(ctx context.Context, b ExecuteBatch, after time.Duration, slow func()) (*BatchResult, error) {
	if b.ID == "" {
		b.ID = event.NewID("b_")
	}
	b.ReplyTo = nil
	wait := 24 * time.Hour
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), 0) + time.Minute
	}
	if !b.Deadline.IsZero() {
		wait = max(wait, max(time.Until(b.Deadline), 0)+time.Minute)
	}
	f := r.root.RequestFuture(r.pid, &b, wait)
	type answer struct {
		v   any
		err error
	}
	done := make(chan answer, 1)
	go func() { // owned by this call: it ends when the future does, which Execute waits for
		v, err := f.Result()
		done <- answer{v, err}
	}()
	var noted <-chan time.Time
	if slow != nil {
		t := time.NewTimer(after)
		defer t.Stop()
		noted = t.C
	}
	var a answer
wait:
	for {
		select {
		case a = <-done:
			break wait
		case <-noted:
			noted = nil
			slow()
		case <-ctx.Done():
			r.root.Send(r.pid, &CancelBatch{ID: b.ID})
			a = <-done
			break wait
		}
	}
	if a.err != nil {
		return nil, fmt.Errorf("toolrunner: batch %s: %w", b.ID, a.err)
	}
	res, ok := a.v.(*BatchResult)
	if !ok {
		return nil, fmt.Errorf("toolrunner: batch %s: unexpected answer %T", b.ID, a.v)
	}
	return res, nil
}

// Cancel cancels one call.
func (r *Runner) Cancel(callID string) { r.root.Send(r.pid, &Cancel{CallID: callID}) }

// CancelAll cancels every call.
func (r *Runner) CancelAll() { r.root.Send(r.pid, &CancelAll{}) }

// Stop stops the runner, which cancels its calls, and waits until every batch
// has delivered its result or ctx is done.
func (r *Runner) Stop(ctx context.Context) error {
	if err := r.root.StopFuture(r.pid).Wait(); err != nil {
		return fmt.Errorf("toolrunner: stop: %w", err)
	}
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }() // ends with the last batch, which the stop cancelled
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("toolrunner: stop: calls still running: %w", ctx.Err())
	}
}
