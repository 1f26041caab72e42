package session

import (
	"context"
	"sync"
	"time"

	"github.com/tah-dev/tah/wire"
)

// deadlines are the approval deadlines of the sessions a Manager owns, one
// timer per session: a timer outlives its actor's passivation (the wait
// holds no actor), and on expiry delivers the denial to the session, which
// loads it again. A load re-arms the deadline from the log
// (tool.approval-requested), so a node that takes a session over enforces it.
type deadlines struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
}

// arm sets sid's deadline to at, replacing the one it had.
func (m *Manager) armDeadline(sid string, at time.Time) {
	d := &m.deadlines
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.timers[sid]; t != nil {
		t.Stop()
	}
	if d.timers == nil {
		d.timers = map[string]*time.Timer{}
	}
	d.timers[sid] = time.AfterFunc(time.Until(at), func() { m.expire(sid) })
}

// disarmDeadlines stops the deadlines of the sessions for which match is
// true: they are no longer this node's to enforce (handed over, claimed
// elsewhere, decided).
func (m *Manager) disarmDeadlines(match func(sid string) bool) {
	d := &m.deadlines
	d.mu.Lock()
	defer d.mu.Unlock()
	for sid, t := range d.timers {
		if match(sid) {
			t.Stop()
			delete(d.timers, sid)
		}
	}
}

func (m *Manager) disarmDeadline(sid string) {
	m.disarmDeadlines(func(s string) bool { return s == sid })
}

// expire delivers the denial of sid's undecided calls, their deadline passed.
func (m *Manager) expire(sid string) {
	m.disarmDeadline(sid)
	err := m.Deliver(sid, &Command{Kind: wire.CommandDeny, Expired: true, Done: func(o Outcome) {
		if o.Err != nil {
			m.cfg.logger().Warn("calls past their approval deadline not denied yet: the next load of the session does it", "session", sid, "err", o.Err)
		}
	}})
	if err != nil {
		m.cfg.logger().Info("approval deadline not enforced here: the session's next owner does it", "session", sid, "err", err)
	}
}

// keepDeadline makes the approval deadline of a's turn durable: when the
// work left the turn waiting for approval with a deadline, JetStream is
// asked to send the session an expired deny at that time (a schedule,
// wire.ApprovalDeadlineSchedule), so that the deadline holds although no
// node holds the session then (this node stopped, say, and nothing loads
// the session again); when a decision or a cancel ended the wait, the
// schedule is removed. The timer (armDeadline) stays the precise way while
// the session is loaded; either denial is the same, once.
func (m *Manager) keepDeadline(ctx context.Context, a *AgentContext, cmd *Command, out Outcome) {
	if out.Err != nil || !a.claimed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st := a.state
	switch {
	case st.AwaitingApproval && !st.ApprovalDeadline.IsZero():
		// @at has whole seconds: the next one at or after the deadline.
		at := st.ApprovalDeadline.UTC().Truncate(time.Second)
		if at.Before(st.ApprovalDeadline) {
			at = at.Add(time.Second)
		}
		in := wire.Input{Command: wire.CommandDeny, Decision: &wire.Decision{Expired: true}}
		if _, err := m.bus.AddScheduledInput(ctx, a.Session, wire.ApprovalDeadlineSchedule, "@at "+at.Format(time.RFC3339), "", in); err != nil {
			m.cfg.logger().Warn("approval deadline not scheduled: only this node's timer enforces it", "session", a.Session, "err", err)
		}
	case !st.AwaitingApproval && (cmd.Kind == wire.CommandApprove || cmd.Kind == wire.CommandDeny || cmd.Kind == wire.CommandCancel):
		if _, err := m.bus.RemoveSchedule(ctx, a.Session, wire.ApprovalDeadlineSchedule); err != nil {
			m.cfg.logger().Debug("approval deadline schedule not removed: it fires and denies nothing", "session", a.Session, "err", err)
		}
	}
}
