package wire

import (
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// SessionBudget is a session's budget beside what it spent, as tah.api.get
// and tah.api.list show it (SessionSummary.Budget), for a client to say
// "$0.42 of $1.00": each limit in force with its scope's spend, and the
// limit the last turn reached. A session has none (the field is absent)
// when no limit is in force and its last turn did not fail at one.
type SessionBudget struct {
	// Limits are the limits in force for the current (or last) turn and for
	// the session, in the order turn tokens, cost_usd, time_ms, then session
	// tokens, cost_usd, time_ms, those set: for each, the tightest of the
	// node's agent.budget (as its last claim recorded it), the session's
	// own (at create, budget.set) and the turn's own (its input's), From
	// saying which (event.Effective). Limit is the limit, Spent what its
	// scope (the current or last turn, or the session's turns together)
	// had spent at the session's last event: tokens (input plus output),
	// US dollars (the calls recorded with a price) or milliseconds run. A
	// time spent leaves out the running part of a turn: see RunningSince.
	Limits []event.BudgetReached `json:"limits,omitempty"`
	// Reached, when the last turn failed at its budget (code
	// budget_exceeded), is the limit it reached and its spend then
	// (agent.failed's budget). It is as it was then: a budget.set since
	// may have raised (or removed) that limit, Limits has it as it is now.
	// A resume that reopens the turn clears it.
	Reached *event.BudgetReached `json:"reached,omitempty"`
	// RunningSince, while a turn runs (waiting for tools and approval
	// included), is when it last started running (turn.started or
	// turn.reopened): a time limit's Spent counts the turn's time up to
	// there, and the spend now is Spent plus the time since (SpentAt).
	RunningSince time.Time `json:"running_since,omitzero"`
}

// BudgetOf is st's budget and spend as SessionBudget has them: nil when
// no limit is in force and the last turn did not fail at one. The read
// model keeps what it needs of each session to give the same (package
// store); a client that folds the log itself (the web UI) calls it on its
// fold.
func BudgetOf(st *projection.State) *SessionBudget {
	return NewSessionBudget(st.BudgetLimits(), st.Spend(time.Time{}), st.LastBudget, st.TurnRunningSince)
}

// NewSessionBudget is the SessionBudget of the limits in force (Spent
// ignored), the spend of the turn and the session (without the running
// part of a turn) and the limit the last turn reached, if any: nil when
// there are neither limits nor a limit reached.
func NewSessionBudget(limits []event.BudgetReached, spend event.Spend, reached *event.BudgetReached, runningSince time.Time) *SessionBudget {
	if len(limits) == 0 && reached == nil {
		return nil
	}
	b := &SessionBudget{Reached: reached}
	if len(limits) > 0 {
		b.Limits = make([]event.BudgetReached, len(limits))
		for i, l := range limits {
			s := spend.Turn
			if l.Scope == event.ScopeSession {
				s = spend.Session
			}
			switch l.Kind {
			case event.LimitTokens:
				l.Spent = float64(s.Tokens)
			case event.LimitCostUSD:
				l.Spent = s.CostUSD
			case event.LimitTimeMS:
				l.Spent = float64(s.TimeMS)
			}
			b.Limits[i] = l
		}
	}
	if !runningSince.IsZero() {
		b.RunningSince = runningSince.UTC()
	}
	return b
}

// SpentAt is limit l's spend at now: Spent, plus, for a time limit while a
// turn runs, the time since RunningSince.
func (b *SessionBudget) SpentAt(l event.BudgetReached, now time.Time) float64 {
	if l.Kind == event.LimitTimeMS && !b.RunningSince.IsZero() && now.After(b.RunningSince) {
		return l.Spent + float64(now.Sub(b.RunningSince).Milliseconds())
	}
	return l.Spent
}

// IsReached reports whether l, a limit of Limits, is the one the last turn
// reached, still at the figure it reached: the same scope, kind and limit
// as Reached (a limit raised since is not).
func (b *SessionBudget) IsReached(l event.BudgetReached) bool {
	return b.Reached != nil && b.Reached.Scope == l.Scope && b.Reached.Kind == l.Kind && b.Reached.Limit == l.Limit
}
