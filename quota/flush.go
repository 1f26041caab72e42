package quota

import (
	"context"
	"maps"
	"time"
)

// flushRetry is how long the flusher waits before it sends again what
// NATS did not take; flushOnClose bounds the last flush, at Close.
const (
	flushRetry   = time.Second
	flushOnClose = 5 * time.Second
)

// flusher sends what Spend counted, whenever it is kicked, until ctx ends;
// then once more, for at most flushOnClose.
func (m *Meter) flusher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushOnClose)
			defer cancel()
			if err := m.flush(last); err != nil {
				m.log.Warn("tenants' usage not counted at close", "error", err)
			}
			return
		case <-m.kick:
		}
		if err := m.flush(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("counting the tenants' usage: retrying", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(flushRetry):
				select {
				case m.kick <- struct{}{}:
				default:
				}
			}
		}
	}
}

// flush adds each counter's unsent amount to it, and takes what was
// acknowledged off unsent (what Spend added meanwhile stays for the next
// flush). It stops at the first error, the rest left for the next.
func (m *Meter) flush(ctx context.Context) error {
	m.mu.RLock()
	batch := maps.Clone(m.unsent)
	m.mu.RUnlock()
	for subj, n := range batch {
		if n == 0 {
			continue
		}
		total, err := m.add(ctx, subj, n)
		if err != nil {
			return err
		}
		// The acknowledged total has the amount: it leaves unsent in the
		// same move, so that total never counts it twice.
		m.mu.Lock()
		if m.unsent[subj] -= n; m.unsent[subj] == 0 {
			delete(m.unsent, subj)
		}
		m.known[subj] = knownTotal{total: total, at: m.now()}
		m.mu.Unlock()
	}
	return nil
}
