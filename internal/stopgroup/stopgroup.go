package stopgroup

import "sync"

// Group counts the stops it runs in the background. The zero value is ready.
type Group struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	waited bool // Wait was called: later stops run in place
}

// Go runs stop on a goroutine of its own, which Wait waits for; once Wait has
// been called, in place (the owner's connections are closed by then, so it
// returns at once).
func (g *Group) Go(stop func()) {
	g.mu.Lock()
	if g.waited {
		g.mu.Unlock()
		stop()
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		stop()
	}()
}

// Wait waits until the stops started by Go have returned. Call it once, when
// the owner closes.
func (g *Group) Wait() {
	g.mu.Lock()
	g.waited = true
	g.mu.Unlock()
	g.wg.Wait()
}
