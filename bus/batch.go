package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
)

// Group commit. With fsync on every write (nats-server's SyncAlways) each
// JetStream publish costs its own fsync, so sessions that append at the same
// moment to one shard would pay one fsync each. A committer per shard lets
// them share one. An append that finds no batch and fewer than maxAlone
// single appends in flight on its shard is published alone, as it always was
// (no added latency for a lone session, nor for a few); appends that arrive
// while a batch or maxAlone appends are in flight queue, and when one of
// those completes they go together as one JetStream atomic batch (2.12+,
// stream setting allow_atomic): the server checks every message's own
// Nats-Expected-Last-Subject-Sequence and Nats-Msg-Id, stores all of them or
// none, and on an R1 file store with SyncAlways commits the batch with one
// fsync, acknowledging only once it is on disk (server/stream.go,
// processJetStreamAtomicBatchMsg, "coalesceSync").
//
// All or nothing cuts both ways: one fenced member, one duplicate id, fails
// the whole batch. A batch that fails in any way is therefore not a verdict
// on its members: each member then appends alone through appendOne, which
// tells fenced from landed from unknown, so every member gets exactly the
// outcome it would have had alone. When the batch's answer was lost, appendOne
// starts by reading the log back, as it does after a lost acknowledgement.
//
// An atomic batch has a fixed cost of its own: on an R1 file store the server
// stages it in a store of its own (a directory created, its metadata synced,
// then removed), a few fsyncs and directory operations whatever the batch's
// size: measured on a loaded 2-core machine (BenchmarkGroupCommit), a batch
// of 8 cost more than 8 single appends, one of 16 about as much, and 1,000
// sessions appending at once (125 a shard) went 2.5 times as fast grouped. A
// group smaller than minGroup is therefore published as single appends, as
// before this existed.
//
// A queued append waits only for something already sent to complete: appends
// in flight never wait for one another.
//
// TAH_IN has a committer too, for the inputs this node stores (Bus.storeInput:
// the API's commands, the agent protocol's prompts, sub-agents' tasks). An
// input has no fence, only its Nats-Msg-Id: when its batch fails it is sent
// alone with the same id, and the duplicate window answers with the batch's
// sequence if the batch landed after all.

// minGroup is the fewest queued appends that go as one atomic batch; fewer go
// one by one. maxAlone is how many single appends may be in flight on a shard
// before the next ones queue (the stream stores them one at a time anyway).
// Variables so that tests can batch small groups.
var minGroup, maxAlone = 16, 4

// maxGroup bounds the records of one batch, far below nats-server's default
// limit of 1,000 (JetStreamLimits.MaxBatchSize); a server configured below it
// refuses the batch, and its members then append alone.
const maxGroup = 128

// Headers of JetStream atomic batch publish (nats-server 2.12+), and an upper
// bound of the bytes they add to a message (the id is 16 characters). The
// stored messages keep them; readers ignore them.
const (
	batchHeaders   = 128
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// committer groups the appends to one shard (see above). Its state is guarded
// by mu; it has no goroutine of its own: the appending goroutines lead the
// batches.
type committer struct {
	b      *Bus
	stream string
	// link is the connection of the shard's appends, set by setLink before
	// anything appends; a batch goes on it whole.
	link *link
	// request sends a batch's commit on link and waits for the answer. Tests
	// replace it to lose answers.
	request func(ctx context.Context, m *nats.Msg) (*nats.Msg, error)

	mu sync.Mutex
	// alone counts the single appends in flight, batching whether a batch
	// is; queue holds the appends waiting for them.
	alone    int
	batching bool
	queue    []*pending

	// batches and batched count the atomic batches that committed and the
	// records they carried.
	batches, batched atomic.Int64
}

// pending is one append waiting in a committer's queue.
type pending struct {
	m    *nats.Msg // a record with its fencing headers, or an input
	size int
	// dispatched is closed when the append leaves the queue: alone, or as a
	// member of batch.
	dispatched chan struct{}
	batch      *batch
	index      int // in batch.members
}

// batch is a group of appends published as one atomic batch.
type batch struct {
	members []*pending
	// done is closed when the batch's outcome is known: seqs (by member) when
	// it committed; otherwise err, with unknown set when the server's answer
	// was lost (the batch may have landed).
	done    chan struct{}
	seqs    []uint64
	err     error
	unknown bool
}

// newCommitter returns the committer of a stream (a shard of the log, or
// TAH_IN), or nil when its messages go one by one: the stream does not allow
// atomic publish (an external server older than 2.12, or a log this build
// has not set up), it is replicated (an R3 stream's Raft leader already
// sends the proposals that are queued together in one append entry, and a
// batch would only add a round trip), or the embedded server fsyncs on an
// interval (there is no fsync to share, and a batch would only cost its
// staging).
func newCommitter(b *Bus, cfg jetstream.StreamConfig) *committer {
	if !cfg.AllowAtomicPublish || cfg.Replicas > 1 || (b.cfg.Embedded() && b.cfg.SyncInterval > 0) {
		return nil
	}
	c := &committer{b: b, stream: cfg.Name}
	c.setLink(b.main)
	return c
}

// setLink makes l the connection of c's batches (Bus.openPool).
func (c *committer) setLink(l *link) {
	c.link, c.request = l, l.nc.RequestMsgWithContext
}

// commit appends m for w: alone (when the shard has no committer, the record
// is too large for a batch, or the committer lets it go alone now, at once or
// after a wait in its queue), or as a member of a batch. It returns the
// record's sequence, with appendOne's errors.
func (w *SessionWriter) commit(ctx context.Context, m *nats.Msg) (uint64, error) {
	c := w.b.committerOf(w.shard)
	if c == nil {
		return w.appendOne(ctx, m, w.positionID)
	}
	w.setHeaders(m, w.last, w.positionID)
	size := natsx.MsgSize(m)
	if size+batchHeaders > w.b.MaxPayload() {
		// Too large to carry the batch's headers too: it goes alone, always.
		return w.appendOne(ctx, m, w.positionID)
	}
	return c.send(ctx, m, size, func(ctx context.Context) (uint64, error) {
		return w.appendOne(ctx, m, w.positionID)
	}, func(ctx context.Context, unknown bool) (uint64, error) {
		// Alone, which tells fenced from landed from unknown; after a lost
		// answer it first reads the log back.
		return w.appendAfter(ctx, m, w.positionID, unknown)
	})
}

// send stores m, of size bytes, through c: by alone when c lets it go alone
// (at once, or after a wait in its queue), or as a member of a batch. When
// its batch failed as a whole, again stores it alone, told whether the
// batch's answer was lost (it may have landed). It returns m's sequence.
func (c *committer) send(ctx context.Context, m *nats.Msg, size int,
	alone func(context.Context) (uint64, error), again func(ctx context.Context, unknown bool) (uint64, error)) (uint64, error) {
	p := &pending{m: m, size: size, dispatched: make(chan struct{})}
	if !c.enter(p) {
		// Something already sent completes, and then leave dispatches p.
		select {
		case <-p.dispatched:
		case <-ctx.Done():
			if c.withdraw(p) {
				return 0, ctx.Err() // nothing was sent
			}
			<-p.dispatched // taken already: its batch decides, whatever ctx says
		}
	}
	bt := p.batch
	if bt == nil {
		defer c.leave()
		return alone(ctx)
	}
	if p.index == 0 {
		// The first member leads the batch, for all of its members, whatever
		// its own ctx says: the others wait on it.
		c.publish(ctx, bt)
		close(bt.done)
		c.leaveBatch()
	} else {
		<-bt.done
	}
	if bt.err == nil {
		return bt.seqs[p.index], nil
	}
	return again(ctx, bt.unknown)
}

// committerOf is the committer of shard k, nil when it has none.
func (b *Bus) committerOf(k int) *committer {
	if k < len(b.commits) {
		return b.commits[k]
	}
	return nil
}

// enter reports whether p may go alone now; otherwise p is queued.
func (c *committer) enter(p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching && c.alone < maxAlone {
		c.alone++
		return true
	}
	c.queue = append(c.queue, p)
	return false
}

// withdraw takes p out of the queue, reporting whether it was still there.
func (c *committer) withdraw(p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return true
		}
	}
	return false
}

// leave ends a single append.
func (c *committer) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alone--
	c.dispatch()
}

// leaveBatch ends a batch.
func (c *committer) leaveBatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batching = false
	c.dispatch()
}

// dispatch sends on what queued while no batch is in flight: minGroup
// appends or more as one batch (led by its first member), fewer one by one up
// to maxAlone in flight. c.mu is held.
func (c *committer) dispatch() {
	if c.batching || len(c.queue) == 0 {
		return
	}
	if len(c.queue) < minGroup {
		for len(c.queue) > 0 && c.alone < maxAlone {
			c.alone++
			close(c.queue[0].dispatched)
			c.queue = c.queue[1:]
		}
		return
	}
	limit := c.b.MaxPayload()
	n, size := 0, 0
	for n < len(c.queue) && n < maxGroup && (n == 0 || size+c.queue[n].size <= limit) {
		size += c.queue[n].size
		n++
	}
	bt := &batch{members: make([]*pending, n), done: make(chan struct{})}
	copy(bt.members, c.queue)
	c.queue = append(c.queue[:0], c.queue[n:]...)
	c.batching = true
	for i, p := range bt.members {
		p.batch, p.index = bt, i
		close(p.dispatched)
	}
}

// batchAck is the server's answer to a batch's commit: the stream sequence of
// its last message and the count of its messages, or an error.
type batchAck struct {
	Error  *jetstream.APIError `json:"error,omitempty"`
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
}

// publish sends bt as one atomic batch and records its outcome in bt. The
// messages are copies of the members' (which keep their own fencing headers
// and ids) with the batch's headers; all but the last go without a reply
// subject, the last commits the batch and carries its answer. The server
// stores a batch's messages at consecutive sequences.
func (c *committer) publish(ctx context.Context, bt *batch) {
	// The batch belongs to all of its members: it runs to its end even when
	// its leader's caller gives up, bounded by AppendTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.b.cfg.AppendTimeout)
	defer cancel()
	id := event.NewID("")
	n := len(bt.members)
	var err error
	var reply *nats.Msg
	committing := false // the commit was (or may have been) sent
	for i, p := range bt.members {
		m := &nats.Msg{Subject: p.m.Subject, Data: p.m.Data, Header: maps.Clone(p.m.Header)}
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < n-1 {
			if err = c.link.nc.PublishMsg(m); err != nil {
				break
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		committing = true
		reply, err = c.request(ctx, m)
	}
	if err != nil {
		// Without its commit a batch is never stored; after the commit was
		// sent, it may have landed whole.
		bt.err, bt.unknown = fmt.Errorf("atomic batch of %d messages to %s: %w", n, c.stream, err), committing
		return
	}
	var ack batchAck
	switch err := json.Unmarshal(reply.Data, &ack); {
	case err != nil:
		bt.err, bt.unknown = fmt.Errorf("atomic batch of %d messages to %s: the answer %q: %w", n, c.stream, reply.Data, err), true
		return
	case ack.Error != nil:
		// A refusal: nothing of the batch was stored.
		bt.err = fmt.Errorf("atomic batch of %d messages to %s: %w", n, c.stream, ack.Error)
		return
	case ack.Stream != c.stream || ack.Batch != id || ack.Count != n || ack.Seq < uint64(n):
		bt.err, bt.unknown = fmt.Errorf("atomic batch %s of %d messages to %s: unexpected answer %q", id, n, c.stream, reply.Data), true
		return
	}
	bt.seqs = make([]uint64, n)
	for i := range bt.seqs {
		bt.seqs[i] = ack.Seq - uint64(n-1-i)
	}
	c.batches.Add(1)
	c.batched.Add(int64(n))
}

// groupCommits reports the atomic batches committed on b's shards and the
// records they carried.
func (b *Bus) groupCommits() (batches, records int64) {
	for _, c := range b.commits {
		if c != nil {
			batches += c.batches.Load()
			records += c.batched.Load()
		}
	}
	return batches, records
}

// atomicPublishSupported reports whether the server b is connected to
// supports atomic batch publish (nats-server 2.12 or later). In a cluster of
// mixed versions, the stream's leader may still refuse a batch: its members
// then append alone.
func (b *Bus) atomicPublishSupported() bool {
	major, rest, _ := strings.Cut(b.nc.ConnectedServerVersion(), ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if errors.Join(err1, err2) != nil {
		return false
	}
	return ma > 2 || (ma == 2 && mi >= 12)
}
