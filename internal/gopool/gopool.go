package gopool

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdle is how long a worker waits for its next function before it
// ends, when New is given zero.
const DefaultIdle = 10 * time.Second

// Pool runs functions on kept goroutines (see the package doc). Its zero
// value is not usable: make one with New.
type Pool struct {
	idle time.Duration
	work chan func()
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	// started counts the workers started, for tests.
	started atomic.Int64
}

// New returns a Pool whose workers end after idle without work (zero:
// DefaultIdle).
func New(idle time.Duration) *Pool {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Pool{idle: idle, work: make(chan func()), quit: make(chan struct{})}
}

// Go runs fn on an idle worker, or on a new one. After Stop it still runs
// fn, on a worker that ends with it.
func (p *Pool) Go(fn func()) {
	select {
	case p.work <- fn:
	default:
		p.wg.Add(1)
		p.started.Add(1)
		go p.worker(fn)
	}
}

// worker runs fn, then what Go hands it, until it has been idle for p.idle
// or the pool stops.
func (p *Pool) worker(fn func()) {
	defer p.wg.Done()
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(p.idle)
		select {
		case fn = <-p.work:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}

// Stop ends the idle workers at once and each busy one after its function.
// It may be called more than once.
func (p *Pool) Stop() { p.once.Do(func() { close(p.quit) }) }

// Wait waits until every worker has ended: call it after Stop, once
// nothing calls Go any more.
func (p *Pool) Wait() { p.wg.Wait() }

// Dispatcher is a protoactor-go dispatcher (actor.WithDispatcher) that runs
// an actor's mailbox on p, so that its Receive keeps its stack too
// (protoactor's default starts a goroutine each time a message arrives at
// an idle mailbox).
func (p *Pool) Dispatcher() Dispatcher { return Dispatcher{p} }

// Dispatcher runs mailboxes on a Pool; see Pool.Dispatcher.
type Dispatcher struct{ p *Pool }

// Schedule runs fn, a mailbox's run, on the pool.
func (d Dispatcher) Schedule(fn func()) { d.p.Go(fn) }

// Throughput is the messages a mailbox handles before it lets others run:
// protoactor's default.
func (Dispatcher) Throughput() int { return 300 }
