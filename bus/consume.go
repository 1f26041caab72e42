package bus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/wire"
)

// InputHandler receives the inputs of the partitions a node consumes. It is
// called for one partition at a time, in the partition's order, and must not
// block: hand the message to the session's actor and return. The actor Acks
// it when the work it asks for is done, keeping it alive meanwhile
// (KeepAlive). ctx is cancelled when the consumer stops.
type InputHandler func(ctx context.Context, m *InputMsg)

// InputMsg is an input delivered to this node, which owns its session for now.
type InputMsg struct {
	wire.Input
	// Session is the session the input is for.
	Session string
	// Partition is the input partition of the session.
	Partition int
	// Seq is the message's sequence in TAH_IN; it stays the same on redelivery.
	Seq uint64
	// Delivered counts the deliveries of this message, 1 the first time. More
	// means an earlier owner took it and did not finish.
	Delivered uint64

	b   *Bus
	msg jetstream.Msg

	keepMu   sync.Mutex
	keepStop func() // the running KeepAlive's stop, if any
}

// Header is the input message's NATS headers, as the client sent them (a
// W3C traceparent, say): read them as a stranger's.
func (m *InputMsg) Header() nats.Header {
	if m.msg == nil {
		return nil
	}
	return m.msg.Headers()
}

// settle stops a running KeepAlive: the message is being acked, nakked or
// terminated.
func (m *InputMsg) settle() {
	m.keepMu.Lock()
	stop := m.keepStop
	m.keepStop = nil
	m.keepMu.Unlock()
	if stop != nil {
		stop()
	}
}

// Ack removes the input from TAH_IN, waiting for the server to confirm: call it
// when the work the input asked for is done (the turn ended).
func (m *InputMsg) Ack(ctx context.Context) error {
	m.settle()
	if err := m.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack input %s of %s: %w", m.ID, m.Session, err)
	}
	return nil
}

// InProgress tells the server the input is still being worked on, resetting
// its ack wait (Config.InputAckWait).
func (m *InputMsg) InProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.msg.InProgress()
}

// Nak asks for redelivery after delay (0: at once), to this node or, if the
// partition moved, to its new owner.
func (m *InputMsg) Nak(ctx context.Context, delay time.Duration) error {
	m.settle()
	if err := ctx.Err(); err != nil {
		return err
	}
	if delay > 0 {
		return m.msg.NakWithDelay(delay)
	}
	return m.msg.Nak()
}

// Term drops the input for good, with a reason recorded in the server's
// advisory. The sender is not told: see Reject.
func (m *InputMsg) Term(ctx context.Context, reason string) error {
	m.settle()
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.msg.TermWithReason(reason)
}

// Reject drops the input for good and reports why, a wire.Refusal of code,
// on tah.sess.<sid>.err and on its ReplyTo, where its sender sees it: for
// inputs that are well formed but cannot be served.
func (m *InputMsg) Reject(ctx context.Context, code string, cause error) error {
	return m.RejectAs(ctx, wire.Refusal(m.Session, m.ID, code, cause.Error()))
}

// RejectAs is Reject with the refusal refusal (a wire.Refusal, which may
// say more: the quota an input was over).
func (m *InputMsg) RejectAs(ctx context.Context, refusal wire.Outcome) error {
	if err := m.Term(ctx, refusal.FailureCode+": "+refusal.Failure); err != nil {
		return err
	}
	return m.b.reportRefusal(refusal, m.ReplyTo, m.Reply)
}

// KeepAlive calls InProgress every interval (0: a third of
// Config.InputAckWait) until the returned stop is called, or the message is
// acked, nakked or terminated, so that a long turn is not redelivered while it
// runs. stop waits for the keep-alive goroutine to end and may be called more
// than once. A second KeepAlive replaces the first.
func (m *InputMsg) KeepAlive(every time.Duration) (stop func()) {
	m.settle()
	if every <= 0 {
		every = m.b.cfg.InputAckWait / 3
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.msg.InProgress()
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	m.keepMu.Lock()
	m.keepStop = stop
	m.keepMu.Unlock()
	return stop
}

// InputConsumer pulls input partitions on behalf of a node. The set of
// partitions it pulls may change while it runs (Add, Remove): a node in a
// cluster pulls its share.
type InputConsumer struct {
	b      *Bus
	h      InputHandler
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	parts   map[int]*partitionPull
	stopped bool
	// redelivered is, by partition, the last TAH_IN sequence delivered
	// before TakeOver reset its consumer (see partitionPull.redelivered).
	redelivered map[int]uint64

	// look asks heal to look at a partition whose pulls report trouble
	// (lookAt); heal ends with ctx, healed is closed then.
	look   chan int
	healed chan struct{}
}

type partitionPull struct {
	p     int
	name  string
	cc    jetstream.ConsumeContext
	mu    sync.Mutex // held while a message is handled
	pinID string     // the pin id of this client, as last seen on a message
	done  bool
	// redelivered is the last TAH_IN sequence delivered (to a dead node)
	// when TakeOver reset the consumer: the server counts the deliveries
	// again from 1 after a reset, and an input up to it is a redelivery all
	// the same (InputMsg.Delivered).
	redelivered uint64
}

// ConsumeInputs pulls the given partitions (all of them when none is given)
// through their durable consumers in the priority group "tah" with the pinned
// policy: of all the nodes pulling a partition, the server delivers to one at a
// time, and moves the partition to another when that one stops pulling for
// Config.InputPinnedTTL. A message that is not a valid input is terminated and
// reported on tah.sess.<sid>.err without reaching h, so it never blocks its
// partition. Stop or Close the consumer when done; Close of the Bus stops it.
func (b *Bus) ConsumeInputs(ctx context.Context, h InputHandler, partitions ...int) (*InputConsumer, error) {
	if len(partitions) == 0 {
		for p := range b.cfg.Partitions {
			partitions = append(partitions, p)
		}
	}
	c, err := b.NewInputConsumer(h)
	if err != nil {
		return nil, err
	}
	for _, p := range partitions {
		if err := c.Add(ctx, p); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// NewInputConsumer returns a consumer that pulls no partition yet: Add them.
func (b *Bus) NewInputConsumer(h InputHandler) (*InputConsumer, error) {
	cctx, cancel := context.WithCancel(context.Background())
	c := &InputConsumer{b: b, h: h, ctx: cctx, cancel: cancel, parts: map[int]*partitionPull{}, redelivered: map[int]uint64{},
		look: make(chan int, b.cfg.Partitions), healed: make(chan struct{})}
	if err := b.track(c); err != nil {
		cancel()
		return nil, err
	}
	go c.heal()
	return c, nil
}

// Add starts pulling partition p; pulling it already is not an error. The
// partition's inputs arrive once the server pins it to this consumer: at once
// when no other node holds it, otherwise when the holder unpins it (Remove,
// Close) or stops pulling for Config.InputPinnedTTL.
func (c *InputConsumer) Add(ctx context.Context, p int) error {
	if p < 0 || p >= c.b.cfg.Partitions {
		return fmt.Errorf("input partition %d: there are %d (0..%d)", p, c.b.cfg.Partitions, c.b.cfg.Partitions-1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrClosed
	}
	if c.parts[p] != nil {
		return nil
	}
	pp := &partitionPull{p: p, name: wire.PartitionConsumer(p), redelivered: c.redelivered[p]}
	cons, err := c.b.in.Consumer(ctx, pp.name)
	if err == nil {
		pp.mu.Lock()
		err = c.consume(pp, cons)
		pp.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("consume input partition %d: %w", p, err)
	}
	c.parts[p] = pp
	return nil
}

// consume starts pulling pp through cons (pp.mu held).
func (c *InputConsumer) consume(pp *partitionPull, cons jetstream.Consumer) error {
	cc, err := cons.Consume(func(m jetstream.Msg) { c.deliver(pp, m) },
		jetstream.PullPriorityGroup(wire.InputGroup),
		jetstream.PullExpiry(max(c.b.cfg.InputPinnedTTL/3, time.Second)),
		jetstream.PullMaxMessages(min(100, c.b.cfg.InputMaxAckPending)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// The consumer deleted (its pulls end), or pulls that nobody
			// answers (no heartbeat; no responders: gone with a restart of
			// JetStream, or not elected yet): heal looks.
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) {
				c.lookAt(pp.p)
			}
		}),
	)
	if err != nil {
		return err
	}
	pp.cc = cc
	return nil
}

// Healing. A partition's durable consumer can go while it is pulled: an
// operator (or a credential that may) deletes it; a server of its own (R1)
// keeps a memory consumer nowhere across the restart of its JetStream after
// a full disk; every replica of one restarts. Its pulls then end (deleted)
// or go unanswered, and without a consumer the partition's inputs would
// wait in TAH_IN for good. heal makes the consumer again (unless the
// operator sets TAH up: Config.NoSetup, then it says so and looks again
// later) and pulls it afresh. A consumer made again delivers the
// partition's inputs not acknowledged from the start (TAH_IN is a work
// queue: what it holds is what is left to do), as after an ack wait.
const healEvery = time.Second // the least time between two looks at a partition

// lookAt asks heal to look at partition p; it never blocks.
func (c *InputConsumer) lookAt(p int) {
	select {
	case c.look <- p:
	default: // a look is due already
	}
}

// heal runs until the consumer stops, looking at the partitions lookAt
// names, each at most once per healEvery, and after n failures in a row
// once per healEvery<<n up to healEvery<<5 (half a minute: a consumer only
// its operator's setup makes is not asked for, nor logged, every second).
func (c *InputConsumer) heal() {
	defer close(c.healed)
	last, fails := map[int]time.Time{}, map[int]int{}
	for {
		select {
		case <-c.ctx.Done():
			return
		case p := <-c.look:
			if wait := healEvery<<min(fails[p], 5) - time.Since(last[p]); wait > 0 {
				select {
				case <-c.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			last[p] = time.Now()
			err := c.healPartition(p)
			if err == nil {
				fails[p] = 0
				continue
			}
			fails[p]++
			if c.b.cfg.Logger != nil {
				c.b.cfg.Logger.Warn("input partition: its consumer could not be made again; looking again", "partition", p, "err", err, "in", healEvery<<min(fails[p], 5))
			}
			c.lookAt(p)
		}
	}
}

// healPartition makes partition p's consumer again if it is gone, and pulls
// it afresh if it was gone or its pulls ended.
func (c *InputConsumer) healPartition(p int) error {
	c.mu.Lock()
	pp := c.parts[p]
	c.mu.Unlock()
	if pp == nil {
		return nil // removed meanwhile
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	cons, err := c.b.in.Consumer(ctx, pp.name)
	gone := errors.Is(err, jetstream.ErrConsumerNotFound)
	switch {
	case gone && c.b.cfg.NoSetup:
		return fmt.Errorf("consumer %s of %s is gone, and this node sets nothing up (run the setup): %w", pp.name, wire.InputStream, err)
	case gone:
		cons, err = c.b.in.CreateConsumer(ctx, c.b.inputConsumerConfig(p))
		if errors.Is(err, jetstream.ErrConsumerExists) { // made meanwhile (another node), otherwise
			cons, err = c.b.in.Consumer(ctx, pp.name)
		}
		if err != nil {
			return fmt.Errorf("make consumer %s of %s again: %w", pp.name, wire.InputStream, err)
		}
		if c.b.cfg.Logger != nil {
			c.b.cfg.Logger.Warn("input partition: its consumer was gone, made again", "partition", p, "consumer", pp.name)
		}
	case err != nil:
		c.lookAt(p) // JetStream not answering (a leader election, a restart): look again
		return nil
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.done {
		return nil
	}
	if !gone && pp.cc != nil {
		select {
		case <-pp.cc.Closed():
		default:
			return nil // pulling: nothing to heal
		}
	}
	if pp.cc != nil {
		pp.cc.Stop()
	}
	pp.pinID = ""
	return c.consume(pp, cons)
}

// Remove hands partitions over: it stops pulling them, waits until no
// handler call for them runs, calls handOver (if not nil: the node stops its
// sessions of those partitions there, so that their inputs go back
// unacknowledged), then, when unpin says so, unpins each partition this
// consumer holds, so that another node pulling it takes it over at once (a
// node cut off from NATS says false: the unpins could not reach the server,
// and the pins expire by themselves). Inputs already delivered stay with
// their handlers, which Ack or Nak them as usual.
func (c *InputConsumer) Remove(ctx context.Context, partitions []int, unpin bool, handOver func()) error {
	var gone []*partitionPull
	c.mu.Lock()
	for _, p := range partitions {
		if pp := c.parts[p]; pp != nil {
			gone = append(gone, pp)
			delete(c.parts, p)
		}
	}
	c.mu.Unlock()
	for _, pp := range gone {
		pp.stop()
	}
	if handOver != nil {
		handOver()
	}
	if !unpin {
		return nil
	}
	var errs []error
	for _, pp := range gone {
		if err := c.unpin(ctx, pp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Partitions returns the partitions being pulled, sorted.
func (c *InputConsumer) Partitions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.parts))
	for p := range c.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (c *InputConsumer) deliver(pp *partitionPull, m jetstream.Msg) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.done {
		return // not acked: redelivered to whoever pulls next
	}
	if pin := m.Headers().Get("Nats-Pin-Id"); pin != "" {
		pp.pinID = pin
	}
	md, err := m.Metadata()
	if err != nil {
		_ = m.TermWithReason("no metadata")
		return
	}
	sid := wire.SessionFromSubject(m.Subject())
	raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	in, err := parseInput(raw, md.Sequence.Stream)
	if err != nil {
		code := wire.CodeMalformedInput
		if errors.Is(err, wire.ErrReplySubject) {
			code = wire.CodeReplySubject
		}
		_ = m.TermWithReason(code + ": " + err.Error())
		// Never onto a subject no client owns: the log, another session's
		// inputs, the API.
		replyTo := m.Headers().Get(wire.HeaderReplyTo)
		if wire.CheckReplySubject(replyTo) != nil {
			replyTo = ""
		}
		_ = c.b.reportRefusal(wire.Refusal(sid, in.ID, code, err.Error()), replyTo, in.Reply)
		return
	}
	delivered := md.NumDelivered
	if md.Sequence.Stream <= pp.redelivered {
		delivered = max(delivered, 2)
	}
	c.h(c.ctx, &InputMsg{
		Input: in, Session: sid, Partition: pp.p, Seq: md.Sequence.Stream,
		Delivered: delivered, b: c.b, msg: m,
	})
}

// Stop stops pulling and waits until no handler call is running. Inputs
// delivered and not yet acked stay with their handlers, which may still Ack
// them; the partitions stay pinned to this node until Config.InputPinnedTTL
// passes (Close hands them over at once).
func (c *InputConsumer) Stop() {
	c.stop()
	c.b.untrack(c)
}

func (c *InputConsumer) stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	parts := slices.Collect(maps.Values(c.parts))
	c.mu.Unlock()
	for _, pp := range parts {
		pp.stop()
	}
	c.cancel()
	<-c.healed
}

// stop ends the pulls of pp and waits for a handler call in progress.
func (pp *partitionPull) stop() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.done = true
	if pp.cc != nil {
		pp.cc.Stop()
	}
}

// Close is Stop, then unpins each partition this node holds, so that another
// node pulling it takes it over at once instead of after
// Config.InputPinnedTTL. Unacked inputs go to the new owner when their ack
// wait expires, or at once if their handler Naks them.
func (c *InputConsumer) Close(ctx context.Context) error {
	c.Stop()
	c.mu.Lock()
	parts := slices.Collect(maps.Values(c.parts))
	c.parts = map[int]*partitionPull{}
	c.mu.Unlock()
	var errs []error
	for _, pp := range parts {
		if err := c.unpin(ctx, pp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TakeOver readies partition p, which this consumer is about to pull (Add),
// for taking it over from a node taken for dead at since: the inputs that
// node held and never acknowledged are delivered again now instead of after
// their ack wait. If the server pins p to a client pinned before since (the
// dead node's), or to no client at all (the pin goes with its consumer's
// leader when that changes), it resets the partition's consumer to its ack
// floor, then unpins a stale pin; Add after it gets them. Nobody pulls
// the partition then, so no input delivered to a live node is delivered
// again. A pin given since is another node's, one this consumer has seen on
// its inputs is its own: either stays, and so does the consumer, as it does
// when this consumer pulls p already and no client is pinned (the server
// may pin this one any moment). It returns how many inputs were delivered
// again (0 when it did nothing). When the consumer cannot be read or reset
// (its leader died with the node, and another is not elected yet), the
// error wraps ErrNotTakenOver: try again before pulling the partition. With
// a server that has no reset (nats-server before 2.14) the inputs wait for
// their ack wait, and a stale pin is unpinned all the same.
func (c *InputConsumer) TakeOver(ctx context.Context, p int, since time.Time) (int, error) {
	c.mu.Lock()
	pp, stopped := c.parts[p], c.stopped
	c.mu.Unlock()
	if stopped {
		return 0, ErrClosed
	}
	name := wire.PartitionConsumer(p)
	cons, err := c.b.in.Consumer(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return 0, fmt.Errorf("take over input partition %d: %w", p, err) // nothing to take over
	case err != nil:
		return 0, fmt.Errorf("take over input partition %d: %w: %w", p, ErrNotTakenOver, err)
	}
	info := cons.CachedInfo()
	mine := ""
	if pp != nil {
		pp.mu.Lock()
		mine = pp.pinID
		pp.mu.Unlock()
	}
	var pin *jetstream.PriorityGroupState
	for i, g := range info.PriorityGroups {
		if g.Group == wire.InputGroup && g.PinnedClientID != "" {
			pin = &info.PriorityGroups[i]
		}
	}
	switch {
	case pin != nil && (pin.PinnedClientID == mine || !pin.PinnedTS.Before(since)):
		return 0, nil // a live node's pin
	case pin == nil && pp != nil:
		return 0, nil // this consumer may be pinned and delivered to now
	}
	held := info.NumAckPending
	if held > 0 {
		// Marked before the reset: the first input delivered again may
		// arrive before its answer.
		c.mu.Lock()
		c.redelivered[p] = max(c.redelivered[p], info.Delivered.Stream)
		c.mu.Unlock()
		if pp != nil {
			pp.mu.Lock()
			pp.redelivered = max(pp.redelivered, info.Delivered.Stream)
			pp.mu.Unlock()
		}
		if !hasConsumerReset(c.b.Conn().ConnectedServerVersion()) {
			held = 0 // they come after their ack wait
		} else if _, err := c.b.in.ResetConsumer(ctx, name); err != nil {
			// No responders too: only the consumer's leader serves it.
			return 0, fmt.Errorf("take over input partition %d: reset: %w: %w", p, ErrNotTakenOver, err)
		}
	}
	if pin != nil {
		// Not done, the pin expires by itself (InputPinnedTTL).
		if err := c.b.in.UnpinConsumer(ctx, name, wire.InputGroup); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return held, fmt.Errorf("take over input partition %d: unpin: %w", p, err)
		}
	}
	return held, nil
}

// hasConsumerReset reports whether a nats-server of version v (as its INFO
// gives it: "2.15.3") resets consumers ($JS.API.CONSUMER.RESET, 2.14 and
// later).
func hasConsumerReset(v string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 2 || major == 2 && minor >= 14
}

// unpin releases partition pp if the server has it pinned to this consumer.
func (c *InputConsumer) unpin(ctx context.Context, pp *partitionPull) error {
	pp.mu.Lock()
	pin := pp.pinID
	pp.mu.Unlock()
	if pin == "" {
		return nil
	}
	cons, err := c.b.in.Consumer(ctx, pp.name)
	if err != nil {
		return fmt.Errorf("unpin partition %d: %w", pp.p, err)
	}
	for _, g := range cons.CachedInfo().PriorityGroups {
		if g.Group == wire.InputGroup && g.PinnedClientID == pin {
			if err := c.b.in.UnpinConsumer(ctx, pp.name, wire.InputGroup); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("unpin partition %d: %w", pp.p, err)
			}
		}
	}
	return nil
}
