package stopgroup

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Wait returns only once every stop started before it has returned.
func TestWaitWaitsForTheStops(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var done atomic.Int32
	for range 3 {
		g.Go(func() {
			<-release
			done.Add(1)
		})
	}
	waited := make(chan struct{})
	go func() {
		g.Wait()
		close(waited)
	}()
	close(release)
	<-waited
	if n := done.Load(); n != 3 {
		t.Fatalf("Wait returned with %d of 3 stops done", n)
	}
}

// A stop asked for after Wait runs in place: Go returns once it has.
func TestGoAfterWaitRunsInPlace(t *testing.T) {
	var g Group
	g.Wait()
	ran := false
	g.Go(func() { ran = true })
	if !ran {
		t.Fatal("a stop asked for after Wait had not run when Go returned")
	}
}

// Stops asked for while the owner waits are either waited for or run in
// place; none is lost (run with -race: no Add races the Wait).
func TestGoBesideWait(t *testing.T) {
	var g Group
	var done atomic.Int32
	var askers sync.WaitGroup
	for range 8 {
		askers.Go(func() { g.Go(func() { done.Add(1) }) })
	}
	g.Wait()
	askers.Wait()
	if n := done.Load(); n != 8 {
		t.Fatalf("%d of 8 stops ran", n)
	}
}
