package client

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// turnLoop is the state of a Turn's goroutine.
type turnLoop struct {
	t          *Turn
	st         *turnState
	out        *wire.Outcome
	failed     bool // the command was not carried out: no events to wait for
	eventsDone bool
	evq        []event.Event
	dq         []Delta
	endTimer   <-chan time.Time
	drainTimer <-chan time.Time
	followed   <-chan []event.Event // whole records: the turn's end is known once its record is read
	// held is a resume's "nothing to resume" while the log is read up to
	// it: a turn that ended since the resume was published (its node
	// resumed it, or it was running) is the resume's.
	held *wire.Outcome
	// waiting is the outcome of a turn that waits for sub-agents: not its
	// end, which no reply will bring (the turn goes on when a child's
	// resume comes); the end of the turn read in the log settles it.
	waiting *wire.Outcome
}

// run is the Turn's goroutine: it reads the answers to its input, the
// session's events and deltas, and hands this turn's on, until the outcome
// is known and the turn's events are over and delivered, or Close. It
// delivers unsent first: what a Turn it was attached after had not.
func (t *Turn) run(st *turnState, unsent []event.Event) {
	defer t.finish()
	l := &turnLoop{t: t, st: st, evq: unsent}
	defer func() { t.unsent = l.evq }() // before finish: Attach reads it once closed
	if t.follower != nil {
		l.followed = t.follower.records
	}
	if t.isDecided() { // an attached Turn whose outcome came before
		o := t.out
		l.out, l.failed, l.drainTimer = &o, t.err != nil, time.After(drainWait)
	}
	for !l.over() {
		var evOut chan<- event.Event
		var evHead event.Event
		if len(l.evq) > 0 {
			evOut, evHead = t.events, l.evq[0]
		}
		var dOut chan<- Delta
		var dHead Delta
		if len(l.dq) > 0 {
			dOut, dHead = t.deltas, l.dq[0]
		}
		select {
		case <-t.stop:
			t.decide(wire.Outcome{}, t.closedErr())
			return
		case evOut <- evHead:
			l.evq = l.evq[1:]
		case dOut <- dHead:
			l.dq = l.dq[1:]
		case rec, ok := <-l.followed:
			l.record(rec, ok)
		case <-t.status:
			// The connection is back: the outcome may have been published
			// while it was down. The log tells the end of the turn.
			if !t.isDecided() {
				l.followLate()
			}
		case m := <-t.raw:
			if d, ours := l.st.delta(m); ours && t.opts.deltas && !l.eventsDone {
				l.dq = append(l.dq, d)
			}
		case m := <-t.replies:
			l.reply(m)
		case m := <-t.errs:
			if o, mine, err := t.a.refused(m); mine && !t.isDecided() {
				l.settle(o, err)
			}
		case <-l.endTimer:
			if !t.isDecided() {
				l.settle(l.st.outcomeOfEnd(), nil)
			}
		case <-l.drainTimer:
			l.eventsDone = true
		}
	}
}

// over reports whether the Turn's work is done: the outcome known and the
// turn's events over and delivered.
func (l *turnLoop) over() bool {
	if !l.t.isDecided() {
		return false
	}
	if l.t.follower == nil {
		return true // no events asked for, none followed
	}
	if l.eventsDone || l.st.eventsOver(l.out, l.failed) {
		l.eventsDone = true
		return len(l.evq) == 0 && len(l.dq) == 0
	}
	return false
}

// settle decides the outcome, and gives the rest of the events drainWait.
func (l *turnLoop) settle(o wire.Outcome, err error) {
	l.t.decide(o, err)
	l.out, l.failed = &o, err != nil
	l.drainTimer = time.After(drainWait)
}

// settleHeld settles a held "nothing to resume" once the log tells: the
// end of a turn read since the resume was published is its outcome.
func (l *turnLoop) settleHeld() {
	switch {
	case l.held == nil || l.t.isDecided():
	case l.st.end != nil:
		l.settle(l.st.outcomeOfEnd(), nil)
	case l.st.lastSeq >= l.held.LastSeq || l.t.follower == nil:
		l.settle(*l.held, l.t.a.failed(*l.held))
	}
}

// followLate starts following the log, when the Turn does not yet.
func (l *turnLoop) followLate() {
	if l.t.follower == nil {
		if l.t.followLate(); l.t.follower != nil {
			l.followed = l.t.follower.records
		}
	}
}

// record reads a record of the session's log (ok false: the Follower ended).
func (l *turnLoop) record(rec []event.Event, ok bool) {
	if !ok {
		l.t.decide(wire.Outcome{}, l.t.closedErr())
		l.followed, l.eventsDone = nil, true
		return
	}
	for _, ev := range rec {
		ours, released := l.st.event(ev)
		if ours && l.t.opts.events && !l.eventsDone {
			l.evq = append(l.evq, ev)
		}
		l.deliver(nil, released)
	}
	l.deliver(l.st.decide())
	if l.st.end != nil && l.waiting != nil && !l.t.isDecided() {
		l.settle(l.st.outcomeOfEnd(), nil)
	}
	if l.st.end != nil && l.endTimer == nil {
		l.endTimer = time.After(endWait)
	}
	l.settleHeld()
}

// deliver queues this turn's events and deltas, as the Turn was asked to.
func (l *turnLoop) deliver(evs []event.Event, ds []Delta) {
	if l.eventsDone {
		return
	}
	if l.t.opts.events {
		l.evq = append(l.evq, evs...)
	}
	if l.t.opts.deltas {
		l.dq = append(l.dq, ds...)
	}
}

// reply reads a message on the input's reply subject.
func (l *turnLoop) reply(m *nats.Msg) {
	t := l.t
	o, final, err := t.a.reply(m)
	if final && !t.isDecided() {
		l.st.answer(o)
		l.deliver(l.st.decide())
	}
	switch {
	case !final || t.isDecided():
	case o.AwaitsAgents():
		// Not the turn's end: follow the log for it, unless it cannot be
		// followed (then this outcome is all a client gets).
		l.waiting = &o
		if l.followLate(); l.t.follower == nil {
			l.settle(o, err)
		} else if l.st.end != nil {
			l.settle(l.st.outcomeOfEnd(), nil)
		}
	case t.a.command == wire.CommandResume && o.FailureCode == wire.FailureNothingToResume && o.LastSeq >= t.from:
		l.held = &o
		l.followLate()
		l.settleHeld()
	default:
		l.settle(o, err)
	}
}

// finish stops what the Turn started and closes its channels.
func (t *Turn) finish() {
	t.release()
	close(t.events)
	close(t.deltas)
	t.c.untrack(t)
	close(t.closed)
}
