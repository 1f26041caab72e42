package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/gopool"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// DefaultMaxConcurrent is a runner's bound on concurrent calls when Config
// leaves it zero.
const DefaultMaxConcurrent = 8

// Config configures a runner.
type Config struct {
	// Executor runs each call (validation, timeouts, panics, large outputs).
	// Required.
	Executor *tools.Executor
	// MaxConcurrent bounds the calls this runner runs at once, across batches;
	// zero means DefaultMaxConcurrent.
	MaxConcurrent int
	// Limiter, when set, also bounds the calls: share one between runners to bound
	// a whole node.
	Limiter *Limiter
	// Logger receives the runner's records; nil means the actor system's logger.
	Logger *slog.Logger
	// Observe, when set, is told of every call as soon as it ends (its result
	// is then on its way to the batch's BatchResult): a node counts its tool
	// calls with it. It runs in the batch's goroutine and must return quickly.
	Observe func(CallResult)
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	if c.Executor == nil {
		return errors.New("toolrunner: Config.Executor is nil")
	}
	if c.MaxConcurrent < 0 {
		return errors.New("toolrunner: Config.MaxConcurrent is negative")
	}
	return nil
}

// Props returns the props of a runner actor. It panics if cfg is not valid; call
// cfg.Validate first when cfg comes from outside. Spawn it as a child of the
// session actor: stopping the session stops the runner, which cancels its calls.
func Props(cfg Config) *actor.Props {
	return props(cfg, new(sync.WaitGroup), gopool.New(0), nil)
}

// props makes the runner's props: wg counts its batches in flight, its
// batches and calls run on p, and stopped, when not nil, is closed once
// the actor has stopped (a Runner handle's, which waits on it).
func props(cfg Config, wg *sync.WaitGroup, p *gopool.Pool, stopped chan struct{}) *actor.Props {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &runner{cfg: cfg, wg: wg, pool: p, stopped: stopped, own: NewLimiter(cfg.MaxConcurrent)}
	}, actor.WithDispatcher(p.Dispatcher()))
}

// runner is the actor. Its state is touched only in Receive; each batch runs in a
// goroutine of its pool (stopped by cancelling the batch's context) and
// reports back with a batchDone message.
type runner struct {
	cfg     Config
	own     *Limiter
	wg      *sync.WaitGroup
	pool    *gopool.Pool
	stopped chan struct{}
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	batches map[string]*batch
	calls   map[string][]context.CancelFunc
	seq     int
}

type batch struct {
	cancel  context.CancelFunc
	callIDs []string
}

func (r *runner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		r.log = r.cfg.Logger
		if r.log == nil {
			r.log = c.Logger()
		}
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.batches = make(map[string]*batch)
		r.calls = make(map[string][]context.CancelFunc)
	case *ExecuteBatch:
		r.start(c, m)
	case *Cancel:
		for _, cancel := range r.calls[m.CallID] {
			cancel()
		}
	case *CancelBatch:
		if b, ok := r.batches[m.ID]; ok {
			b.cancel()
		}
	case *CancelAll:
		for _, b := range r.batches {
			b.cancel()
		}
	case *batchDone:
		if b, ok := r.batches[m.id]; ok {
			b.cancel()
			for _, id := range b.callIDs {
				delete(r.calls, id)
			}
			delete(r.batches, m.id)
		}
	case *actor.Stopping:
		// Every call is cancelled; each batch still delivers its BatchResult.
		if r.cancel != nil {
			r.cancel()
		}
	case *actor.Stopped:
		r.pool.Stop()
		if r.stopped != nil {
			close(r.stopped)
		}
	}
}

func (r *runner) start(c actor.Context, m *ExecuteBatch) {
	replyTo := m.ReplyTo
	if replyTo == nil {
		replyTo = c.Sender()
	}
	if replyTo == nil && m.reply == nil {
		r.log.Warn("toolrunner: batch without a sender or ReplyTo: not run", "batch", m.ID, "session", m.Session, "calls", len(m.Calls))
		return
	}
	id := m.ID
	if id == "" {
		r.seq++
		id = fmt.Sprintf("batch-%d", r.seq)
	}
	if _, dup := r.batches[id]; dup {
		r.seq++
		r.log.Warn("toolrunner: batch id already running; renamed", "batch", id, "session", m.Session)
		id = fmt.Sprintf("%s~%d", id, r.seq)
	}
	base := tools.WithCall(r.ctx, tools.CallInfo{Session: m.Session})
	var bctx context.Context
	var bcancel context.CancelFunc
	if m.Deadline.IsZero() {
		bctx, bcancel = context.WithCancel(base)
	} else {
		bctx, bcancel = context.WithDeadline(base, m.Deadline)
	}
	calls := append([]llm.ToolCall(nil), m.Calls...)
	ctxs := make([]context.Context, len(calls))
	b := &batch{cancel: bcancel}
	for i, call := range calls {
		cctx, ccancel := context.WithCancel(bctx)
		if i < len(m.Spans) && m.Spans[i].IsValid() {
			cctx = trace.ContextWithSpanContext(cctx, m.Spans[i])
		}
		ctxs[i] = cctx
		r.calls[call.ID] = append(r.calls[call.ID], ccancel)
		b.callIDs = append(b.callIDs, call.ID)
	}
	r.batches[id] = b

	root, self := c.ActorSystem().Root, c.Self()
	res := &BatchResult{ID: id, Session: m.Session, Results: make([]CallResult, len(calls))}
	exec := r.cfg.Executor
	if m.Catalog != nil {
		exec = exec.With(m.Catalog)
	}
	reply := m.reply
	r.wg.Add(1)
	r.pool.Go(func() {
		defer r.wg.Done()
		r.runBatch(exec, ctxs, calls, res.Results)
		if reply != nil {
			reply <- res // buffered for it: never blocks
		} else {
			root.Send(replyTo, res)
		}
		root.Send(self, &batchDone{id: id})
	})
}

// runBatch runs calls, filling results in call order. Consecutive calls whose
// tools are not exclusive run concurrently; an exclusive call runs alone, after
// the calls before it and before the calls after it.
func (r *runner) runBatch(exec *tools.Executor, ctxs []context.Context, calls []llm.ToolCall, results []CallResult) {
	exclusive := func(call llm.ToolCall) bool {
		t, ok := exec.Tool(call.Name)
		return ok && tools.IsExclusive(t)
	}
	for i := 0; i < len(calls); {
		j := i + 1
		if !exclusive(calls[i]) {
			for j < len(calls) && !exclusive(calls[j]) {
				j++
			}
		}
		run := func(k int) {
			results[k] = r.runCall(ctxs[k], exec, calls[k])
			if r.cfg.Observe != nil {
				r.cfg.Observe(results[k])
			}
		}
		if j == i+1 {
			run(i) // alone: on the batch's own goroutine
			i = j
			continue
		}
		var wg sync.WaitGroup
		for k := i; k < j; k++ {
			wg.Add(1)
			r.pool.Go(func() {
				defer wg.Done()
				run(k)
			})
		}
		wg.Wait()
		i = j
	}
}

// runCall waits for a slot, then runs one call.
func (r *runner) runCall(ctx context.Context, exec *tools.Executor, call llm.ToolCall) (res CallResult) {
	res.Call = call
	res.Runner = tools.RunnerIn(exec.Catalog(), call.Name)
	defer func() {
		if v := recover(); v != nil { // the executor recovers tool panics; this guards the runner itself
			r.log.Error("toolrunner: panic running a call", "tool", call.Name, "call", call.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res.Result = tools.Failed(event.CodeInternal, fmt.Sprintf("Error: the call to %s failed with an internal error.", call.Name))
		}
	}()
	if err := r.own.Acquire(ctx); err != nil {
		res.Result = notStarted(ctx, call.Name)
		return res
	}
	defer r.own.Release()
	if r.cfg.Limiter != nil {
		if err := r.cfg.Limiter.Acquire(ctx); err != nil {
			res.Result = notStarted(ctx, call.Name)
			return res
		}
		defer r.cfg.Limiter.Release()
	}
	// Done while waiting: a slot and the end can come together. A deadline
	// that passed counts before its context says so (its timer may not have
	// fired yet, while the slot's previous call's, with the same deadline,
	// has): a call never starts past its batch's deadline.
	if d, ok := ctx.Deadline(); ctx.Err() != nil || ok && !time.Now().Before(d) {
		res.Result = notStarted(ctx, call.Name)
		return res
	}
	res.Started = time.Now()
	res.Result = exec.Execute(ctx, call)
	res.Duration = time.Since(res.Started)
	return res
}

func notStarted(ctx context.Context, name string) tools.Result {
	if d, ok := ctx.Deadline(); errors.Is(ctx.Err(), context.DeadlineExceeded) || ctx.Err() == nil && ok && !time.Now().Before(d) {
		return tools.Failed(event.CodeTimeout, fmt.Sprintf("Error: the call to %s ran out of time before it started (the deadline of its batch passed).", name))
	}
	return tools.Failed(event.CodeCancelled, fmt.Sprintf("Error: the call to %s was cancelled before it started.", name))
}
