package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/gopool"
)

// ErrStopped is the error of a batch sent to a runner that stopped before it
// took the batch. A batch it took always has its result (its calls
// cancelled if the runner stopped while they ran).
var ErrStopped = errors.New("the tool runner has stopped")

// Runner is a handle on a runner actor spawned at the root, for callers that are
// not actors (the CLI, tests, a node's wiring). Actors use the messages instead.
type Runner struct {
	root *actor.RootContext
	pid  *actor.PID
	wg   *sync.WaitGroup
	pool *gopool.Pool
	// stopped is closed once the actor has stopped: after it, a batch's
	// result has come or never will.
	stopped chan struct{}
}

// Spawn starts a runner actor under root.
func Spawn(root *actor.RootContext, cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{root: root, wg: new(sync.WaitGroup), pool: gopool.New(0), stopped: make(chan struct{})}
	r.pid = root.Spawn(props(cfg, r.wg, r.pool, r.stopped))
	return r, nil
}

// PID is the runner actor's address.
func (r *Runner) PID() *actor.PID { return r.pid }

// Execute runs b and waits for its result. When ctx is done first, it cancels the
// batch and returns the result that follows (every call cancelled or timed out),
// so that a result always comes back; the error is set only when the runner
// stopped before it took the batch (ErrStopped).
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
	reply := make(chan *BatchResult, 1)
	b.reply = reply
	r.root.Send(r.pid, &b)
	var noted <-chan time.Time
	if slow != nil {
		t := time.NewTimer(after)
		defer t.Stop()
		noted = t.C
	}
	done := ctx.Done()
	for {
		select {
		case res := <-reply:
			return res, nil
		case <-noted:
			noted = nil
			slow()
		case <-done:
			done = nil
			r.root.Send(r.pid, &CancelBatch{ID: b.ID}) // its result follows
		case <-r.stopped:
			// A batch the runner took delivers its result before its
			// goroutine ends; after the actor stopped it takes no more.
			r.wg.Wait()
			select {
			case res := <-reply:
				return res, nil
			default:
				return nil, fmt.Errorf("toolrunner: batch %s: %w", b.ID, ErrStopped)
			}
		}
	}
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
	case <-ctx.Done():
		return fmt.Errorf("toolrunner: stop: calls still running: %w", ctx.Err())
	}
	r.pool.Stop() // the actor did at its end; a pool's stop is idempotent
	r.pool.Wait() // the idle workers end at once, the last batches' just after
	return nil
}
