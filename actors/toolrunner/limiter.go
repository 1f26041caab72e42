package toolrunner

import "context"

// Limiter bounds how many calls run at once. A runner has its own
// (Config.MaxConcurrent); runners may also share one, node-wide (Config.Limiter).
type Limiter struct {
	slots chan struct{}
}

// NewLimiter returns a limiter of n slots (at least 1).
func NewLimiter(n int) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(n, 1))}
}

// Acquire takes a slot, waiting for one until ctx is done.
func (l *Limiter) Acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a slot taken by Acquire.
func (l *Limiter) Release() { <-l.slots }

// Cap is the number of slots.
func (l *Limiter) Cap() int { return cap(l.slots) }
