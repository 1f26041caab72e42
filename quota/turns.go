package quota

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// A tenant with a limit of N running turns has N slots, the subjects
// wire.TurnSubject(tenant, 0..N-1) of wire.TurnStream (in memory, a
// message a subject). A turn takes a free slot with a compare-and-set
// publish (expected last sequence of the subject: none), which the server
// lets one publisher win; the message has a TTL that its owner renews
// (again a compare-and-set, on its own message) while the turn works, so
// that a dead node's slots free themselves; release deletes it. Taking a
// slot is one request when one is free, giving it back one more.
const (
	turnTTL   = 30 * time.Second
	turnRenew = turnTTL / 3
	// turnRetry is the mean pause of a turn that found no slot free before
	// it tries again (with jitter, so that waiting turns spread out).
	turnRetry = 500 * time.Millisecond
)

// TakeTurn holds one of tenant's running turns for session sid until
// release is called, waiting while all of the tenant's slots (its
// MaxRunningTurns) are taken: until another turn gives one back, or ctx
// ends (its error then). Without a limit it holds nothing and costs
// nothing. On an error of NATS it returns the error: the caller goes on
// without a slot. waiting, when not nil, is told once if the turn waits.
func (m *Meter) TakeTurn(ctx context.Context, sid string, waiting func(event.QuotaReached)) (release func(), err error) {
	tenant := event.TenantOf(sid)
	if tenant == "" || m.Limits(tenant).MaxRunningTurns == nil {
		return func() {}, nil
	}
	s, err := m.stream(ctx, wire.TurnStream)
	if err != nil {
		return nil, err
	}
	told := false
	for {
		limit := m.Limits(tenant).MaxRunningTurns
		if limit == nil {
			return func() {}, nil // lifted meanwhile
		}
		first := int64(0)
		if *limit > 0 {
			first = rand.Int64N(*limit) // spread the turns over the slots
		}
		for i := range *limit {
			subj := wire.TurnSubject(tenant, (first+i)%*limit)
			seq, err := m.claimSlot(ctx, subj, 0)
			if errors.Is(err, errSlotTaken) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("tenant %s's running turns: %w", tenant, err)
			}
			return m.holdSlot(s, subj, seq), nil
		}
		if !told && waiting != nil {
			told = true
			waiting(event.QuotaReached{Tenant: tenant, Quota: event.QuotaRunningTurns, Limit: float64(*limit), Used: float64(*limit)})
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(turnRetry/2 + rand.N(turnRetry)):
		}
	}
}

// errSlotTaken: the slot's subject does not hold what the claim expected.
var errSlotTaken = errors.New("slot taken")

// claimSlot publishes a running turn's message on slot subj, with its TTL,
// if the subject's last message is of sequence last (0: none): it returns
// the new message's sequence, or errSlotTaken.
func (m *Meter) claimSlot(ctx context.Context, subj string, last uint64) (uint64, error) {
	msg := nats.NewMsg(subj)
	ack, err := m.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last), jetstream.WithMsgTTL(turnTTL))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, errSlotTaken
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// holdSlot renews the running turn's message of sequence seq on slot subj
// until the returned release, which deletes it. The renewal goroutine is
// release's to stop.
func (m *Meter) holdSlot(s jetstream.Stream, subj string, seq uint64) (release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex // seq, renewed
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(turnRenew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				next, err := m.claimSlot(ctx, subj, seq)
				if err == nil {
					seq = next
				}
				mu.Unlock()
				if err != nil && ctx.Err() == nil {
					m.log.Warn("a running turn's slot was not renewed: it may be counted out before the turn ends", "slot", subj, "error", err)
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			dctx, dcancel := context.WithTimeout(context.Background(), flushTry)
			defer dcancel()
			mu.Lock()
			defer mu.Unlock()
			// By sequence: a slot that expired and was taken by another
			// turn keeps that turn's message.
			if err := s.DeleteMsg(dctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				m.log.Warn("a running turn's slot was not given back: it is taken until its TTL", "slot", subj, "error", err)
			}
		})
	}
}
