package quota

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
)

// flushTry bounds one send of a batch's amount; flushRetry is how long the
// flusher waits before it sends again what NATS did not take; flushOnClose
// bounds the last flush, at Close.
const (
	flushTry     = 5 * time.Second
	flushRetry   = time.Second
	flushOnClose = 5 * time.Second
)

// sendingAmount is a counter's amount in the flusher's batch, and the
// message id it is sent with, the same at each try, so that a try whose
// acknowledgement was lost (its amount stored) and the next are stored
// once.
type sendingAmount struct {
	n  int64
	id string
}

// batches numbers the flusher's batches, for their message ids.
var batches atomic.Uint64

// flusher sends what Spend counted, whenever it is kicked, until ctx ends;
// then once more, for at most flushOnClose. A send runs to its end, never
// cut by Close: its amount would be sent again.
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
		if err := m.flush(context.WithoutCancel(ctx)); err != nil {
			m.log.Warn("counting the tenants' usage: retrying", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(flushRetry):
				m.wake()
			}
		}
	}
}

// flush moves the unsent amounts into the batch (a counter whose amount is
// still in the batch, after an error, keeps that one: its id must not
// change) and sends each of the batch's, taking it off once acknowledged,
// in the same move as its new total is learnt. It stops at the first
// error, the rest left for the next flush.
func (m *Meter) flush(ctx context.Context) error {
	m.mu.Lock()
	for subj, n := range m.unsent {
		if _, busy := m.sending[subj]; busy || n == 0 {
			continue
		}
		m.sending[subj] = sendingAmount{n: n, id: fmt.Sprintf("quota-%s-%d", meterID, batches.Add(1))}
		delete(m.unsent, subj)
	}
	batch := make(map[string]sendingAmount, len(m.sending))
	for subj, a := range m.sending {
		batch[subj] = a
	}
	m.mu.Unlock()
	for subj, a := range batch {
		tctx, cancel := context.WithTimeout(ctx, flushTry)
		total, seq, err := m.add(tctx, subj, a.n, a.id)
		cancel()
		if err != nil {
			return err
		}
		// The amount leaves the batch as the total that holds it is
		// learnt, in one move, so that total() never counts it twice. (A
		// duplicate's total is not told: the next read learns it.)
		m.mu.Lock()
		delete(m.sending, subj)
		if seq > 0 {
			m.learnLocked(subj, total, seq)
		} else {
			delete(m.known, subj)
		}
		m.mu.Unlock()
		if m.unsentIn(subj) {
			m.wake() // what Spend added meanwhile goes in the next batch
		}
	}
	return nil
}

// unsentIn reports whether counter subj has an amount waiting for a batch.
func (m *Meter) unsentIn(subj string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.unsent[subj] != 0
}

// meterID tells this process's message ids from another's.
var meterID = nuid.Next()
