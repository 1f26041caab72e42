package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/quota"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// handleInput hands an input to its session's actor and returns at once. The
// input is acknowledged when the work it asked for has ended; a session that
// another node took over, or a node shutting down, leaves it unacknowledged, so
// that the session's next owner gets it again and resumes.
func (n *Node) handleInput(ctx context.Context, m *bus.InputMsg) {
	kind := wire.Command(m.Command)
	n.Metrics.inputs.WithLabelValues(string(kind)).Inc()
	if err := n.checkInputSize(m); err != nil {
		n.refuse(m, wire.CodeInputTooLarge, err)
		return
	}
	if n.overRate(ctx, m, kind) {
		return
	}
	if kind == wire.CommandCancel {
		err := n.sessions.Deliver(m.Session, &session.Command{Kind: kind, Reason: m.Reason, Target: m.Input.InputID, By: m.Sender, Done: func(o session.Outcome) {
			n.reply(m, o)
		}})
		n.finish(m, err)
		return
	}
	switch n.inflight.add(m, 2*n.bus.Config().InputAckWait) {
	case inputRunning:
		// Its work runs here already (the server redelivered it because a
		// keep-alive was lost, in a consumer leader election say): the running
		// work answers it, through this newest delivery.
		return
	case inputDone:
		// Its work ended here a moment ago and was answered; the ack was lost
		// or overtaken by the redelivery.
		n.ack(m)
		return
	}
	start := time.Now()
	maxSteps := 0
	if m.Options != nil {
		maxSteps = m.Options.MaxSteps
	}
	cmd := &session.Command{Kind: kind, InputID: m.ID, Message: m.UserMessage(), MaxSteps: maxSteps, Decision: m.Decision,
		Expired:    m.Decision != nil && m.Decision.Expired,
		TurnBudget: m.TurnBudget(), Budget: m.Budget,
		Caller: m.Caller(), IfIdle: m.Options != nil && m.Options.IfIdle, WhenBusy: m.WhenBusy(), By: m.Sender,
		// The client's trace context, parsed (a malformed one is dropped).
		Trace: telemetry.ParentOf(telemetry.Extract(ctx, m.Header())),
		Done: func(o session.Outcome) {
			v := settle(o)
			m := n.inflight.done(m.Seq, v.putBack == 0)
			switch {
			case v.putBack > 0:
				if v.why != "" {
					n.log.Warn("input put back: "+v.why, "session", m.Session, "input", m.ID, "err", o.Err)
				}
				_ = m.Nak(context.Background(), v.putBack)
				return
			case v.refuse != "":
				n.refuse(m, v.refuse, o.Err)
				return
			}
			if o.Err == nil && kind != wire.CommandCompact && kind != wire.CommandBudget { // a turn that waits for approval is no end yet
				n.Metrics.turnEnded(o.Status, time.Since(start))
			}
			// The answer first: the ack, in the background, waits on
			// TAH_IN's server, and its work is done (acker).
			n.reply(m, o)
			n.ack(m)
		}}
	if err := n.sessions.Deliver(m.Session, cmd); err != nil {
		n.finish(n.inflight.done(m.Seq, false), err)
	}
}

// overRate counts input m in its tenant's inputs per second (package
// quota; a cancel is not counted, nor an input delivered again) and, over
// the limit, refuses it with code quota_exceeded and the quota's figures,
// and reports that it did. A count that cannot be made lets the input go
// on, logged: the rate is a guard, not a reason to lose work.
func (n *Node) overRate(ctx context.Context, m *bus.InputMsg, kind wire.Command) bool {
	if kind == wire.CommandCancel || m.Delivered > 1 {
		return false
	}
	err := n.quotas.AddInput(ctx, event.TenantOf(m.Session))
	var qe *quota.ExceededError
	switch {
	case err == nil:
		return false
	case errors.As(err, &qe):
		n.Metrics.inputsRefused.Inc()
		refusal := wire.Refusal(m.Session, m.ID, wire.CodeQuotaExceeded, qe.Error())
		refusal.Quota = &qe.Reached
		_ = m.RejectAs(context.Background(), refusal)
		return true
	}
	n.log.Warn("a tenant's input was not counted in its rate: it goes on", "session", m.Session, "input", m.ID, "error", err)
	return false
}

// verdict is what becomes of an input whose work has ended, decided once
// from the work's outcome (settle).
type verdict struct {
	// putBack, when set, leaves the input to its next delivery after this
	// delay: the work is not this node's to finish.
	putBack time.Duration
	why     string // why it is put back, for the log ("" when routine)
	refuse  string // a refusal code (wire.Code*) that ends the input
}

// settle decides what becomes of an input from its work's outcome: put back
// (fenced, stopped, outcome unknown: the next owner gets it again; the log
// unavailable or needing a newer node: later), refused (a corrupt log, an
// unknown session), or else acknowledged and answered.
func settle(o session.Outcome) verdict {
	var fault *projection.Fault
	errors.As(o.Err, &fault)
	switch {
	case o.Fenced || errors.Is(o.Err, session.ErrStopped) || errors.Is(o.Err, bus.ErrOutcomeUnknown):
		return verdict{putBack: time.Second}
	case errors.Is(o.Err, session.ErrUnavailable):
		// The log did not answer for a while: try again later, lose nothing.
		return verdict{putBack: 2 * time.Second, why: "the session's log is unavailable"}
	case fault != nil && fault.Code == projection.FaultNeedsNewerNode:
		// Not corruption: a node that reads the newer log runs it (during a
		// rolling upgrade, this one once upgraded, or the next owner).
		return verdict{putBack: newerNodeRetry, why: "the session's log needs a newer node"}
	case fault != nil:
		return verdict{refuse: wire.CodeCorruptLog}
	case errors.Is(o.Err, session.ErrUnknownSession):
		return verdict{refuse: wire.CodeUnknownSession}
	}
	return verdict{}
}

// inflight tracks the inputs whose work runs on this node, by stream
// sequence, each with its newest delivery and that delivery's keep-alive, and
// the inputs whose work ended here lately.
type inflight struct {
	mu    sync.Mutex
	m     map[uint64]*inflightInput
	ended recentEnds
}

// recentEnds remembers when inputs' work ended, for a while. It keeps them
// in the order they ended as well, so that forget drops the oldest without
// reading the rest: under bench row 9's load it held the thousands of inputs
// of the last 16 s, and a map alone was read whole for each new input.
type recentEnds struct {
	at    map[uint64]time.Time
	order []endedInput
}

type endedInput struct {
	seq uint64
	at  time.Time
}

// end records that the work of the input at seq ended at.
func (r *recentEnds) end(seq uint64, at time.Time) {
	if r.at == nil {
		r.at = map[uint64]time.Time{}
	}
	r.at[seq] = at
	r.order = append(r.order, endedInput{seq, at})
}

// forget drops the inputs that ended more than memory before now.
func (r *recentEnds) forget(now time.Time, memory time.Duration) {
	for len(r.order) > 0 && now.Sub(r.order[0].at) > memory {
		old := r.order[0]
		r.order = r.order[1:]
		if at, ok := r.at[old.seq]; ok && at.Equal(old.at) { // else it ended again since
			delete(r.at, old.seq)
		}
	}
}

// has reports whether the input at seq ended and is not forgotten.
func (r *recentEnds) has(seq uint64) bool {
	_, ok := r.at[seq]
	return ok
}

type inflightInput struct {
	msg  *bus.InputMsg
	stop func() // the keep-alive of msg
}

// What inflight.add found.
const (
	inputNew     = iota // new here: run it
	inputRunning        // its work runs here: m replaces the delivery it answers through
	inputDone           // its work ended here within the memory: only ack m
)

// add registers m and starts keeping it alive, unless its work runs or ended
// here within memory (then see the results).
func (f *inflight) add(m *bus.InputMsg, memory time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[uint64]*inflightInput{}
	}
	f.ended.forget(time.Now(), memory)
	if f.ended.has(m.Seq) {
		return inputDone
	}
	if cur := f.m[m.Seq]; cur != nil {
		cur.stop()
		cur.msg, cur.stop = m, m.KeepAlive(0)
		return inputRunning
	}
	f.m[m.Seq] = &inflightInput{msg: m, stop: m.KeepAlive(0)}
	return inputNew
}

// done unregisters the input at seq, stops its keep-alive and returns its
// newest delivery, the one to settle. ended says whether its work ended (it
// was answered): a redelivery soon after is then only acknowledged.
func (f *inflight) done(seq uint64, ended bool) *bus.InputMsg {
	f.mu.Lock()
	cur := f.m[seq]
	delete(f.m, seq)
	if ended {
		f.ended.end(seq, time.Now())
	}
	f.mu.Unlock()
	cur.stop()
	return cur.msg
}

// acker acknowledges the inputs whose work has ended, each in a goroutine
// of its own, off the path of the work that answered them: an ack waits
// for TAH_IN's server, which with fsync on every write queues it behind
// every input stored and acknowledged before it (one stream, one fsync
// at a time), and neither the session's next turn nor the partition's
// next delivery waits for it. A lost ack costs nothing but a
// redelivery, which the node recognises as done (inflight, or the log).
// The node owns the goroutines: close waits for them before the bus
// closes, and cancels the attempts left when its context ends.
type acker struct {
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newAcker() *acker {
	ctx, cancel := context.WithCancel(context.Background())
	return &acker{ctx: ctx, cancel: cancel}
}

// close waits for the acks under way, and once ctx ends stops their
// attempts and waits for them to return.
func (k *acker) close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		k.cancel()
		<-done
	}
	k.cancel()
	return nil
}

// ack acknowledges an input whose work has ended, in the background (see
// acker).
func (n *Node) ack(m *bus.InputMsg) {
	n.acks.wg.Add(1)
	go func() {
		defer n.acks.wg.Done()
		n.ackNow(n.acks.ctx, m)
	}()
}

// ackNow acknowledges m, trying again for up to the input's ack wait: an
// ack lost in a consumer leader election (a node died) would have the
// input delivered again, and its outcome published twice.
func (n *Node) ackNow(ctx context.Context, m *bus.InputMsg) {
	deadline := time.Now().Add(n.bus.Config().InputAckWait)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := m.Ack(actx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.log.Warn("input not acknowledged: it will be delivered again and recognised as done",
				"session", m.Session, "input", m.ID, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-time.After(min(time.Duration(attempt)*250*time.Millisecond, time.Second)):
		case <-ctx.Done():
		}
	}
}

// finish settles an input whose command could not be delivered.
func (n *Node) finish(m *bus.InputMsg, err error) {
	switch {
	case err == nil:
		n.ack(m)
	case errors.Is(err, session.ErrStopped):
		_ = m.Nak(context.Background(), time.Second)
	default:
		n.refuse(m, wire.CodeRejected, err)
	}
}

// refuse drops an input for good and reports why, a wire.Refusal of code, on
// the session's error subject and on the input's reply subject: the one
// answer a refused input gets.
func (n *Node) refuse(m *bus.InputMsg, code string, err error) {
	n.Metrics.inputsRefused.Inc()
	n.Metrics.errors.WithLabelValues("input").Inc()
	_ = m.Reject(context.Background(), code, err)
}

// newerNodeRetry is how long an input of a session whose log needs a newer
// node waits before it is delivered again.
const newerNodeRetry = 30 * time.Second

// reply publishes the outcome of a command to the reply subject its sender
// named, if any (core NATS: a sender that went away simply misses it).
func (n *Node) reply(m *bus.InputMsg, o session.Outcome) {
	if m.ReplyTo == "" {
		return
	}
	if m.Reply == wire.ReplyAgents {
		// The turn's stream (package agents) said the rest; a run that could
		// not be carried out ends the stream with why.
		if out := o.Wire(); out.Failure != "" {
			_ = natsx.PublishAgentError(n.bus.Conn(), m.ReplyTo, wire.AgentStatusOf(out.FailureCode),
				wire.AgentError{Error: out.FailureCode, Message: out.Failure, Session: m.Session})
		}
		return
	}
	out := o.Wire()
	out.InputID = m.ID
	body, err := json.Marshal(out)
	if err != nil {
		return
	}
	if err := n.bus.Conn().Publish(m.ReplyTo, body); err != nil {
		n.log.Debug("outcome not published", "session", m.Session, "err", err)
	}
}

// checkInputSize refuses the user message of a run over the node's limit
// (Options.MaxInputBytes): its text, or its message as JSON. The server's max
// payload bounds the whole message; this bounds what one input adds to a
// session's history, which every later request of the session carries.
func (n *Node) checkInputSize(m *bus.InputMsg) error {
	size := len(m.Text)
	if m.Message != nil {
		body, err := json.Marshal(m.Message)
		if err != nil {
			return fmt.Errorf("input %s: message: %w", m.ID, err)
		}
		size = len(body)
	}
	if limit := n.maxInputBytes(); size > limit {
		return fmt.Errorf("input %s of session %s is %d bytes, over this node's limit of %d bytes (agent.max_input_bytes): "+
			"send a shorter message, or attach the content as a file the agent's tools can read", m.ID, m.Session, size, limit)
	}
	return nil
}
