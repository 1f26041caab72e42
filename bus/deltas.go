package bus

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/jsonx"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// DeltaMsg is a delta as a subscriber receives it: the session, the epoch
// and sequence its headers carry, and its body.
type DeltaMsg = natsx.Delta

// DeltaPublisher publishes one owner's token deltas for one session on core
// NATS (tah.sess.<sid>.delta): fire and forget, in order, not stored. The final
// text is in the log (llm.completed); deltas only let watchers see it early.
type DeltaPublisher struct {
	b *Bus
	// nc is the connection of the session's appends (pool.go): the deltas
	// are the busiest publishes after them, and keep their order on it.
	nc   *nats.Conn
	subj string
	mu   sync.Mutex
	seq  uint64
	// msg, its header and its body are made once and filled again for each
	// delta under mu: a model streams a delta a token, and PublishMsg has
	// copied them into the connection's buffer when it returns.
	msg  nats.Msg
	body []byte
}

// Deltas returns the delta publisher of session sid for the owner at epoch.
func (b *Bus) Deltas(sid string, epoch uint64) (*DeltaPublisher, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	p := &DeltaPublisher{b: b, nc: b.appendLink(b.ShardOf(sid)).nc, subj: wire.DeltaSubject(sid)}
	p.msg = nats.Msg{Subject: p.subj, Header: nats.Header{
		wire.HeaderEpoch:    []string{strconv.FormatUint(epoch, 10)},
		wire.HeaderDeltaSeq: []string{""},
	}}
	return p, nil
}

// Publish sends one delta of step stepID. It does not wait for anyone: a delta
// nobody listens to is dropped. It fails only if ctx is done or the
// connection is closed.
func (p *DeltaPublisher) Publish(ctx context.Context, stepID string, d llm.Delta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.body = appendDelta(p.body[:0], stepID, d)
	p.msg.Data = p.body
	p.msg.Header[wire.HeaderDeltaSeq][0] = strconv.FormatUint(p.seq, 10)
	if err := p.nc.PublishMsg(&p.msg); err != nil {
		return fmt.Errorf("publish delta on %s: %w", p.subj, err)
	}
	return nil
}

// appendDelta appends the delta's body, the JSON object of wire.Delta as
// json.Marshal writes it (its fields in order, the empty ones left out),
// written here because a model streams one a token: Marshal's reflection
// was most of a delta's cost to its owner.
func appendDelta(b []byte, stepID string, d llm.Delta) []byte {
	start := len(b)
	b = append(b, '{')
	field := func(name, v string) {
		if v == "" {
			return
		}
		if len(b) > start+1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = jsonx.AppendString(b, v)
	}
	field("step_id", stepID)
	field("text", d.Text)
	field("reasoning", d.Reasoning)
	if c := d.ToolCall; c != nil {
		if len(b) > start+1 {
			b = append(b, ',')
		}
		b = append(b, `"tool_call":{"index":`...)
		b = strconv.AppendInt(b, int64(c.Index), 10)
		field("id", c.ID)
		field("name", c.Name)
		field("arguments_delta", c.ArgumentsDelta)
		b = append(b, '}')
	}
	return append(b, '}')
}

// Subscription is a running core NATS subscription. Stop it when done; Close
// of the Bus stops it too.
type Subscription struct {
	b       *Bus
	sub     *nats.Subscription
	mu      sync.Mutex // held while the callback runs
	stopped bool
}

// Stop unsubscribes and waits until the callback is no longer running; it is
// not called after Stop returns. The callback must not call Stop.
func (s *Subscription) Stop() {
	s.stop()
	s.b.untrack(s)
}

func (s *Subscription) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
	}
}

// subscribe runs fn for each message on subj until Stop.
func (b *Bus) subscribe(subj string, fn func(*nats.Msg)) (*Subscription, error) {
	s := &Subscription{b: b}
	if err := b.track(s); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, err := b.nc.Subscribe(subj, func(m *nats.Msg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopped {
			fn(m)
		}
	})
	if err != nil {
		b.untrack(s)
		return nil, fmt.Errorf("subscribe %s: %w", subj, err)
	}
	s.sub = sub
	return s, nil
}

// SubscribeDeltas calls fn, in order, for each token delta of session sid,
// dropping stale ones: a delta of an epoch lower than the highest seen comes
// from a writer that lost ownership. Messages that are not deltas (no epoch
// header, a body that is not JSON) are dropped too. ctx bounds the
// subscription's setup: the subscription runs until Stop.
func (b *Bus) SubscribeDeltas(ctx context.Context, sid string, fn func(DeltaMsg)) (*Subscription, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	filter := natsx.DeltaFilter{Session: sid}
	s, err := b.subscribe(wire.DeltaSubject(sid), func(m *nats.Msg) {
		if d, ok := filter.Accept(m); ok {
			fn(d)
		}
	})
	if err != nil {
		return nil, err
	}
	// Make sure the server knows the subscription before returning, so that
	// no delta published after this call is missed.
	if err := b.flush(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("subscribe deltas of %s: %w", sid, err)
	}
	return s, nil
}

// flush waits until the server has processed everything sent so far.
func (b *Bus) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.AppendTimeout)
		defer cancel()
	}
	return b.nc.FlushWithContext(ctx)
}
