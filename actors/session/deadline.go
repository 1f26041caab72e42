package session

import (
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
