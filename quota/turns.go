package quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// A running turn of a tenant with a limit of them is a message on
// wire.TurnSubject in wire.TurnStream (in memory, a message a subject)
// with a TTL its owner renews while the turn works; the tenant's running
// turns are its subjects there. A node that dies leaves its turns' messages
// to their TTL.
const (
	turnTTL   = 30 * time.Second
	turnRenew = turnTTL / 3
	// turnRetry is the mean pause of a turn that waits for a slot before
	// it looks again (with jitter, so that turns that collided do not
	// collide again).
	turnRetry = 500 * time.Millisecond
)

// TakeTurn holds one of tenant's running turns for session sid until
// release is called, waiting while the tenant has as many as its limit
// (MaxRunningTurns) running: until another turn ends, or ctx ends (its
// error then). Without a limit it holds nothing and costs nothing. A
// turn takes its slot first and then counts, giving it back when the
// count is over the limit, so that two turns on two nodes cannot both take
// the last one (both may give it back, and try again a moment later). On
// an error of NATS it returns the error: the caller goes on without a slot.
// waiting, when not nil, is told once if the turn waits.
func (m *Meter) TakeTurn(ctx context.Context, sid string, waiting func(event.QuotaReached)) (release func(), err error) {
	tenant := event.TenantOf(sid)
	if tenant == "" || m.Limits(tenant).MaxRunningTurns == nil {
		return func() {}, nil
	}
	s, err := m.stream(ctx, wire.TurnStream)
	if err != nil {
		return nil, err
	}
	subj := wire.TurnSubject(sid)
	told := false
	for {
		limit := m.Limits(tenant).MaxRunningTurns
		if limit == nil {
			return func() {}, nil // lifted meanwhile
		}
		if _, err := m.js.PublishMsg(ctx, turnMsg(subj)); err != nil {
			return nil, fmt.Errorf("tenant %s's running turns: %w", tenant, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(wire.TenantTurnSubjects(tenant)))
		if err != nil {
			m.giveBack(s, subj)
			return nil, fmt.Errorf("tenant %s's running turns: %w", tenant, err)
		}
		running := int64(len(info.State.Subjects))
		if running <= *limit {
			return m.holdTurn(s, subj), nil
		}
		m.giveBack(s, subj)
		if !told && waiting != nil {
			told = true
			waiting(event.QuotaReached{Tenant: tenant, Quota: event.QuotaRunningTurns, Limit: float64(*limit), Used: float64(running - 1)})
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(turnRetry/2 + rand.N(turnRetry)):
		}
	}
}

// turnMsg is the message of a running turn on subj, with its TTL.
func turnMsg(subj string) *nats.Msg {
	msg := nats.NewMsg(subj)
	msg.Header.Set(jetstream.MsgTTLHeader, turnTTL.String())
	return msg
}

// holdTurn renews the running turn on subj until the returned release,
// which removes it. The renewal goroutine is release's to stop.
func (m *Meter) holdTurn(s jetstream.Stream, subj string) (release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(turnRenew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := m.js.PublishMsg(ctx, turnMsg(subj)); err != nil && ctx.Err() == nil {
					m.log.Warn("a running turn was not renewed: it may be counted out before it ends", "turn", subj, "error", err)
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			m.giveBack(s, subj)
		})
	}
}

// giveBack removes the running turn on subj (its TTL removes it when this
// cannot).
func (m *Meter) giveBack(s jetstream.Stream, subj string) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTry)
	defer cancel()
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		m.log.Warn("a running turn was not given back: it counts until its TTL", "turn", subj, "error", err)
	}
}
