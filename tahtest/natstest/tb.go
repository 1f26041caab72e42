package natstest

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// TB is what the harness needs of a test: *testing.T and *testing.B satisfy
// it, and Run makes one for a program that is not a test (the benchmarks).
// Like testing's, its Fatalf must be called from the goroutine that runs the
// test: the harness calls it from no other.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// Run calls f with a TB of its own, outside any test: Logf writes a line to
// log (nil discards it), Errorf records a failure, Fatalf records one and ends
// f at once (as FailNow ends a test: f's deferred calls run), and the
// functions given to Cleanup run when f has returned, the last one first. Run
// returns the failures, joined, or nil.
//
//	err := natstest.Run(os.Stderr, "failover", func(tb natstest.TB) {
//		c := tahtest.Start(tb, tahtest.Options{Nodes: 3})
//		...
//	})
func Run(log io.Writer, name string, f func(TB)) error {
	if log == nil {
		log = io.Discard
	}
	r := &runner{name: name, log: log}
	r.call(func() { f(r) })
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			break
		}
		last := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		r.call(last)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// runner is Run's TB.
type runner struct {
	name string
	log  io.Writer

	mu       sync.Mutex
	errs     []error
	cleanups []func()
}

// call runs f on a goroutine of its own, so that a Fatalf in f (which ends
// that goroutine) ends f alone, and waits for it.
func (r *runner) call(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (r *runner) Helper()      {}
func (r *runner) Name() string { return r.name }

func (r *runner) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.log, format+"\n", args...)
}

func (r *runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}
