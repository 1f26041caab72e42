package client

import (
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// run is the Turn's goroutine: it reads the answers to its input, the
// session's events and deltas, and hands this turn's on, until the outcome
// is known and the turn's events are over and delivered, or Close. It
// delivers unsent first: what a Turn it was attached after had not.
func (t *Turn) run(st *turnState, unsent []event.Event) {
	defer t.finish()
	evq := unsent
	defer func() { t.unsent = evq }() // before finish: Attach reads it once closed
	var (
		out        *wire.Outcome
		failed     bool // the command was not carried out: no events to wait for
		eventsDone bool
		dq         []Delta
		endTimer   <-chan time.Time
		drainTimer <-chan time.Time
		followed   <-chan []event.Event // whole records: the turn's end is known once its record is read
		// held is a resume's "nothing to resume" while the log is read up to
		// it: a turn that ended since the resume was published (its node
		// resumed it, or it was running) is the resume's.
		held *wire.Outcome
	)
	if t.follower != nil {
		followed = t.follower.records
	}
	if t.isDecided() { // an attached Turn whose outcome came before
		o := t.out
		out, failed, drainTimer = &o, t.err != nil, time.After(drainWait)
	}
	settle := func(o wire.Outcome, err error) {
		t.decide(o, err)
		out, failed = &o, err != nil
		drainTimer = time.After(drainWait)
	}
	settleHeld := func() {
		switch {
		case held == nil || t.isDecided():
		case st.end != nil:
			settle(st.outcomeOfEnd(), nil)
		case st.lastSeq >= held.LastSeq || t.follower == nil:
			settle(*held, t.a.failed(*held))
		}
	}
	for {
		if t.isDecided() && t.follower == nil {
			return // no events asked for, none followed
		}
		if t.isDecided() && (eventsDone || st.eventsOver(out, failed)) {
			eventsDone = true
			if len(evq) == 0 && len(dq) == 0 {
				return
			}
		}
		var evOut chan<- event.Event
		var evHead event.Event
		if len(evq) > 0 {
			evOut, evHead = t.events, evq[0]
		}
		var dOut chan<- Delta
		var dHead Delta
		if len(dq) > 0 {
			dOut, dHead = t.deltas, dq[0]
		}
		select {
		case <-t.stop:
			t.decide(wire.Outcome{}, t.closedErr())
			return
		case evOut <- evHead:
			evq = evq[1:]
		case dOut <- dHead:
			dq = dq[1:]
		case rec, ok := <-followed:
			if !ok {
				t.decide(wire.Outcome{}, t.closedErr())
				followed, eventsDone = nil, true
				continue
			}
			for _, ev := range rec {
				ours, released := st.event(ev)
				if ours && t.opts.events && !eventsDone {
					evq = append(evq, ev)
				}
				if t.opts.deltas && !eventsDone {
					dq = append(dq, released...)
				}
			}
			if st.end != nil && endTimer == nil {
				endTimer = time.After(endWait)
			}
			settleHeld()
		case <-t.status:
			// The connection is back: the outcome may have been published
			// while it was down. The log tells the end of the turn.
			if t.follower == nil && !t.isDecided() {
				if t.followLate(); t.follower != nil {
					followed = t.follower.records
				}
			}
		case m := <-t.raw:
			if d, ours := st.delta(m); ours && t.opts.deltas && !eventsDone {
				dq = append(dq, d)
			}
		case m := <-t.replies:
			o, final, err := t.a.reply(m)
			switch {
			case !final || t.isDecided():
			case t.a.command == wire.CommandResume && o.FailureCode == wire.FailureNothingToResume && o.LastSeq >= t.from:
				held = &o
				if t.follower == nil {
					if t.followLate(); t.follower != nil {
						followed = t.follower.records
					}
				}
				settleHeld()
			default:
				settle(o, err)
			}
		case m := <-t.errs:
			if o, mine, err := t.a.refused(m); mine && !t.isDecided() {
				settle(o, err)
			}
		case <-endTimer:
			if !t.isDecided() {
				settle(st.outcomeOfEnd(), nil)
			}
		case <-drainTimer:
			eventsDone = true
		}
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
