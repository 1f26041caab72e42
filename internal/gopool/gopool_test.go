package gopool

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// hang bounds a wait that only a bug makes long.
const hang = 20 * time.Second

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hang):
		t.Fatalf("no %s", what)
	}
}

// A worker that ran a function runs the next one handed to it: no new
// goroutine, so no new stack to grow.
func TestWorkerIsKept(t *testing.T) {
	p := New(time.Hour)
	defer func() { p.Stop(); p.Wait() }()
	first := make(chan struct{})
	p.Go(func() { close(first) })
	waitFor(t, first, "first run")
	// Hand the next function to the idle worker itself (Go would start
	// another one if it asked before the worker was back).
	second := make(chan struct{})
	deadline := time.Now().Add(hang)
	for handed := false; !handed; {
		select {
		case p.work <- func() { close(second) }:
			handed = true
		default:
			if time.Now().After(deadline) {
				t.Fatal("the worker never came back for more")
			}
			runtime.Gosched()
		}
	}
	waitFor(t, second, "second run")
	if n := p.started.Load(); n != 1 {
		t.Fatalf("%d workers started, want 1", n)
	}
}

// Go never waits for a worker: functions that block all run at once.
func TestGoNeverWaits(t *testing.T) {
	p := New(0)
	const n = 50
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(n)
	for range n {
		p.Go(func() {
			running.Done()
			<-release
		})
	}
	all := make(chan struct{})
	go func() { running.Wait(); close(all) }()
	waitFor(t, all, "start of every function")
	close(release)
	p.Stop()
	p.Wait()
}

// Stop ends the idle workers, Wait returns once they have; a function given
// after Stop still runs.
func TestStop(t *testing.T) {
	p := New(time.Hour)
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	waitFor(t, ran, "run")
	p.Stop()
	p.Stop() // twice is fine
	late := make(chan struct{})
	p.Go(func() { close(late) })
	waitFor(t, late, "run after Stop")
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	waitFor(t, done, "end of the workers")
}

// An idle worker ends after its idle time.
func TestIdleWorkerEnds(t *testing.T) {
	p := New(time.Millisecond)
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	waitFor(t, ran, "run")
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }() // no Stop: the idle time ends it
	waitFor(t, done, "idle worker's end")
}
