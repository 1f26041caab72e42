package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// How long a Turn waits, once its outcome came, for the rest of its events,
// and, once the log showed its end, for its outcome.
const (
	drainWait = 3 * time.Second
	// endWait: the outcome is a core NATS message, and a client that was
	// reconnecting when it was published missed it; after endWait the log's
	// word is taken.
	endWait = 2 * time.Second
)

// Delta is a token delta: a piece of a streamed answer, its LLM step, and
// the epoch and sequence of the node that published it.
type Delta = natsx.Delta

// TurnOption asks a Turn for more than its outcome.
type TurnOption func(*turnOptions)

type turnOptions struct{ events, deltas bool }

// WithEvents delivers the turn's events on Events.
func WithEvents() TurnOption { return func(o *turnOptions) { o.events = true } }

// WithDeltas delivers the turn's token deltas on Deltas.
func WithDeltas() TurnOption { return func(o *turnOptions) { o.deltas = true } }

// Turn is a run or a resume under way: its outcome, its events and its token
// deltas, from the subscriptions it made before its input was published.
//
// A Turn asked only for its outcome listens to its reply subject and the
// session's refusals: nothing else, no consumer on the log. It follows
// the log (an ordered consumer) when asked for events or deltas, which need
// it to tell its own turn's from another's, and after the connection came
// back while the outcome had not come: the outcome may have been published
// while the connection was down, and then the end of the turn in the log is
// the answer. Close stops it.
type Turn struct {
	c        *Client
	a        asked
	replyTo  string // the input's Tah-Reply-To
	opts     turnOptions
	from     uint64        // the first sequence of the log the Turn may have to read (1: the session's start)
	state    *turnState    // the goroutine's; read by Attach once it ended
	unsent   []event.Event // the events read and not delivered when it ended, for Attach
	follower *Follower     // nil until the Turn follows the log
	status   chan nats.Status
	subs     []*nats.Subscription
	replies  chan *nats.Msg
	errs     chan *nats.Msg
	raw      chan *nats.Msg // deltas as they come
	events   chan event.Event
	deltas   chan Delta
	stop     chan struct{}
	stopOnce sync.Once
	closed   chan struct{}
	decided  chan struct{}
	out      wire.Outcome // set before decided is closed
	err      error
}

// Run starts a turn of session sid with the user message of in (Text or
// Message, and Options: a turn's own max_steps and budget, its limits on
// tokens, cost and time, the tightest of them, the session's and the
// node's in force; its Command is set, its ID generated when empty) and
// returns it once the input is stored. It fails as Publish does, and with
// ErrNoNode when NATS has no TAH streams. A turn that reaches a limit is
// an Outcome of Status failed, Code budget_exceeded, the limit in Budget.
func (c *Client) Run(ctx context.Context, sid string, in wire.Input, opts ...TurnOption) (*Turn, error) {
	in.Command = wire.CommandRun
	return c.startTurn(ctx, sid, in, opts)
}

// Resume continues the turn of session sid that a crash or a stop left
// unfinished. A turn that was running when the resume was published (another
// client's, or one its node resumed by itself after a crash) is the
// resume's: its Outcome is that turn's end. A turn that failed at its
// budget (code budget_exceeded) is reopened and runs on once the budget
// allows it (SetBudget first). Its Outcome fails with ErrNothingToResume
// when no turn was open, and with ErrBudgetExceeded when a limit still
// stops the turn.
func (c *Client) Resume(ctx context.Context, sid string, opts ...TurnOption) (*Turn, error) {
	return c.startTurn(ctx, sid, wire.Input{Command: wire.CommandResume}, opts)
}

func (c *Client) startTurn(ctx context.Context, sid string, in wire.Input, opts []TurnOption) (*Turn, error) {
	in.ReplyTo = c.nc.NewRespInbox()
	m, id, err := natsx.NewInputMsg(sid, c.inputSender(sid), in, c.nc.MaxPayload())
	if err != nil {
		return nil, fmt.Errorf("%s input for %s: %w", in.Command, sid, err)
	}
	telemetry.Inject(ctx, m.Header) // the caller's trace goes on in the turn (W3C headers)
	t := c.newTurn(asked{sid: sid, inputID: id, command: in.Command}, in.ReplyTo, opts)
	// Everything the input causes is listened to before it is published. A
	// run's turn is known in the log by its input id, so a run that is asked
	// only for its outcome, and may never read the log, need not ask where
	// the log ends (a request to the event stream's leader, which after a
	// server's death may take seconds to be elected): if it must read the
	// log after all, it reads the session's from its start.
	t.from = 1
	if t.opts.events || t.opts.deltas || in.Command != wire.CommandRun {
		var err error
		if t.from, err = c.sessionEnd(ctx, sid); err != nil {
			return nil, err
		}
	}
	if err := t.listen(ctx, t.opts.events || t.opts.deltas, newTurnState(t.a, t.from-1), nil); err != nil {
		return nil, err
	}
	if err := c.publish(ctx, sid, id, m); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Attach follows on c the turn that prev (of another Client: a connection
// to a node that came back elsewhere, say) follows, from where prev got to:
// the same input, reply subject and log position, with opts. It closes prev
// first. The Turn it returns follows the log, since the outcome may have
// been published while nobody listened.
func (c *Client) Attach(ctx context.Context, prev *Turn, opts ...TurnOption) (*Turn, error) {
	decided := prev.isDecided() // before Close, which decides ErrClosed
	prev.Close()
	t := c.newTurn(prev.a, prev.replyTo, opts)
	st := prev.state
	t.from = max(prev.from, st.lastSeq+1)
	if decided {
		t.decide(prev.out, prev.err)
	}
	if err := t.listen(ctx, true, st, prev.unsent); err != nil {
		return nil, err
	}
	return t, nil
}

// newTurn is a Turn of input a, answered on replyTo, not listening yet.
func (c *Client) newTurn(a asked, replyTo string, opts []TurnOption) *Turn {
	t := &Turn{c: c, a: a, replyTo: replyTo,
		replies: make(chan *nats.Msg, 4), errs: make(chan *nats.Msg, 16),
		events: make(chan event.Event), deltas: make(chan Delta),
		stop: make(chan struct{}), closed: make(chan struct{}), decided: make(chan struct{})}
	for _, o := range opts {
		o(&t.opts)
	}
	if t.opts.deltas {
		t.raw = make(chan *nats.Msg, 8192) // a fast model's burst, read by the Turn's goroutine
	}
	return t
}

// listen subscribes to what the Turn's input causes, follows the log from
// t.from when follow is set, and starts the Turn's goroutine with st and
// the events to deliver first.
func (t *Turn) listen(ctx context.Context, follow bool, st *turnState, unsent []event.Event) error {
	var err error
	if follow {
		if t.follower, err = t.c.follow(ctx, t.a.sid, t.from, true); err != nil {
			return err
		}
	} else {
		t.status = t.c.nc.StatusChanged(nats.CONNECTED)
	}
	subs := map[string]chan *nats.Msg{t.replyTo: t.replies, wire.ErrorSubject(t.a.sid): t.errs}
	if t.opts.deltas {
		subs[wire.DeltaSubject(t.a.sid)] = t.raw
	}
	t.subs, err = t.c.subscribe(ctx, subs)
	if err == nil {
		err = t.c.track(t)
	}
	if err != nil {
		t.release()
		return err
	}
	t.state = st
	go t.run(st, unsent)
	return nil
}

// followLate starts following the log from the Turn's start, after the
// connection came back with the outcome still to come. A failure leaves the
// Turn waiting for the outcome message, as before.
func (t *Turn) followLate() {
	ctx, cancel := context.WithTimeout(context.Background(), t.c.opts.RequestTimeout)
	defer cancel()
	go func() { // ends with followLate: a Close while the Follow runs cuts it short
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if f, err := t.c.follow(ctx, t.a.sid, t.from, true); err == nil {
		t.follower = f
	}
}

// release stops the Turn's subscriptions, status listener and Follower.
func (t *Turn) release() {
	unsubscribe(t.subs)
	if t.status != nil {
		t.c.nc.RemoveStatusListener(t.status)
	}
	if t.follower != nil {
		t.follower.Close()
	}
}

// Session is the turn's session.
func (t *Turn) Session() string { return t.a.sid }

// InputID is the id of the turn's input.
func (t *Turn) InputID() string { return t.a.inputID }

// Outcome waits for the turn's outcome. A turn that failed or was cancelled
// is an outcome with that Status, not an error; the error is for a command
// that could not be carried out, a *CommandError (ErrNotFound,
// ErrNothingToResume, ErrMalformedInput, ...), which comes with the outcome
// that said so, if one did; or ErrClosed when the Turn or its connection
// closed first; or ctx's error.
func (t *Turn) Outcome(ctx context.Context) (wire.Outcome, error) {
	select {
	case <-t.decided:
		return t.out, t.err
	case <-ctx.Done():
		return wire.Outcome{}, ctx.Err()
	}
}

// Decided is closed once the outcome is known (Outcome then returns at
// once), while the turn's last events may still be on their way.
func (t *Turn) Decided() <-chan struct{} { return t.decided }

// Events delivers the events of this turn, and of no other turn of the
// session, when the Turn was started WithEvents. It is closed when they are
// over (after the end of the turn, or a while after the outcome) or the Turn
// is closed. Read it until it is closed, or Close the Turn.
func (t *Turn) Events() <-chan event.Event { return t.events }

// Deltas delivers the token deltas of this turn's LLM steps, those of an
// older epoch dropped, when the Turn was started WithDeltas; like Events,
// it is closed when the turn's events are over. Deltas are not stored: some
// may be missing (the final text is in llm.completed).
func (t *Turn) Deltas() <-chan Delta { return t.deltas }

// Cancel asks the session to cancel this Turn's work, and no other's (the
// cancel names the Turn's input: wire.Input.InputID); it returns once the
// cancel is stored. A turn that runs or waits for approval is cancelled: its
// outcome then says so. An input still queued behind other work is
// withdrawn: it never runs, and Outcome fails with ErrWithdrawn. A turn
// that ended already is left as it ended.
func (t *Turn) Cancel(ctx context.Context, reason string) error {
	_, err := t.c.Publish(ctx, t.a.sid, wire.Input{Command: wire.CommandCancel, Reason: reason, InputID: t.a.inputID})
	return err
}

// Closed is closed when the Turn is over: its outcome known and its events
// delivered, or Close called.
func (t *Turn) Closed() <-chan struct{} { return t.closed }

// Close stops the Turn (the turn itself goes on: see Cancel) and waits
// until everything it started has stopped.
func (t *Turn) Close() {
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.closed
}

// decide settles the outcome, once; only the Turn's goroutine calls it.
func (t *Turn) decide(o wire.Outcome, err error) {
	select {
	case <-t.decided:
	default:
		t.out, t.err = o, err
		close(t.decided)
	}
}

func (t *Turn) isDecided() bool {
	select {
	case <-t.decided:
		return true
	default:
		return false
	}
}

// closedErr is the error of a Turn that ends before its outcome.
func (t *Turn) closedErr() error {
	if t.c.nc.IsClosed() {
		return fmt.Errorf("%s %s: the connection closed before the outcome of input %s came: %w", t.a.command, t.a.sid, t.a.inputID, ErrClosed)
	}
	return fmt.Errorf("%s %s: the turn was closed before the outcome of input %s came: %w", t.a.command, t.a.sid, t.a.inputID, ErrClosed)
}
