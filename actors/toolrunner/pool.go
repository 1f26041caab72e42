package toolrunner

import (
	"sync"
	"time"
)

// workerIdle is how long a worker of a runner's pool waits for its next
// function before it ends.
const workerIdle = 10 * time.Second

// pool runs a runner's batches and calls on goroutines that it keeps for
// workerIdle after their last function. A new goroutine starts with the
// smallest stack and grows it, copying it, on the way down to a tool's
// input check (encoding/json's decoder is deep): measured on a noop tool,
// those copies were a third of what the runner cost a call
// (BenchmarkExecute). A worker keeps the stack it grew.
//
// A function never waits for a worker: it starts a new one when none is
// idle, so the pool bounds nothing (the runner's Limiter does).
type pool struct {
	work chan func()
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newPool() *pool {
	return &pool{work: make(chan func()), quit: make(chan struct{})}
}

// run runs fn on an idle worker, or on a new one.
func (p *pool) run(fn func()) {
	select {
	case p.work <- fn:
	default:
		p.wg.Add(1)
		go p.worker(fn)
	}
}

// worker runs fn, then what run hands it, until it has been idle for
// workerIdle or the pool stops.
func (p *pool) worker(fn func()) {
	defer p.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(workerIdle)
		select {
		case fn = <-p.work:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}

// stop ends the idle workers, and each busy one once its function returns;
// wait waits for them.
func (p *pool) stop() { p.once.Do(func() { close(p.quit) }) }
func (p *pool) wait() { p.wg.Wait() }

// dispatcher runs the runner actor's mailbox on the pool, so that the
// actor's Receive keeps its stack too (protoactor's default dispatcher
// starts a goroutine each time a message arrives at an idle mailbox).
type dispatcher struct{ p *pool }

func (d dispatcher) Schedule(fn func()) { d.p.run(fn) }

// Throughput is the messages a mailbox handles before it lets others run:
// protoactor's default.
func (dispatcher) Throughput() int { return 300 }
