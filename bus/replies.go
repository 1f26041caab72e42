package bus

import (
	"context"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// replyMux receives the replies of multi-reply requests (batched direct gets)
// on one wildcard subscription, _INBOX.<id>.*, and hands each reply to the
// request whose token ends its subject. It saves a subscription per request
// and never blocks the connection: replies queue without bound until read.
type replyMux struct {
	nc     *nats.Conn
	prefix string

	mu   sync.Mutex
	sub  *nats.Subscription
	next uint64
	reqs map[string]*replyQueue
}

// replyQueue is the replies of one request.
type replyQueue struct {
	subject string
	mu      sync.Mutex
	msgs    []*nats.Msg
	ready   chan struct{} // signalled when msgs grows
}

func newReplyMux(nc *nats.Conn) *replyMux {
	return &replyMux{nc: nc, prefix: nc.NewInbox() + ".", reqs: map[string]*replyQueue{}}
}

// open registers a request and returns its queue, subscribing on first use.
func (m *replyMux) open() (*replyQueue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sub == nil {
		sub, err := m.nc.Subscribe(m.prefix+"*", m.deliver)
		if err != nil {
			return nil, err
		}
		_ = sub.SetPendingLimits(-1, -1)
		m.sub = sub
	}
	m.next++
	tok := strconv.FormatUint(m.next, 10)
	q := &replyQueue{subject: m.prefix + tok, ready: make(chan struct{}, 1)}
	m.reqs[tok] = q
	return q, nil
}

func (m *replyMux) close(q *replyQueue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.reqs, q.subject[len(m.prefix):])
}

func (m *replyMux) deliver(msg *nats.Msg) {
	if len(msg.Subject) <= len(m.prefix) {
		return
	}
	m.mu.Lock()
	q := m.reqs[msg.Subject[len(m.prefix):]]
	m.mu.Unlock()
	if q == nil {
		return // a late reply to a request that gave up
	}
	q.mu.Lock()
	q.msgs = append(q.msgs, msg)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next returns the request's next reply, waiting for it until ctx ends.
func (q *replyQueue) next(ctx context.Context) (*nats.Msg, error) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			m := q.msgs[0]
			q.msgs[0] = nil
			q.msgs = q.msgs[1:]
			q.mu.Unlock()
			return m, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
