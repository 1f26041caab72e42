package inspector

import (
	"strconv"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/wire"
)

// budgetView is a session's budget as its page's header shows it, beside
// its cost: each limit in force with what its scope spent of it, and the
// limit the last turn stopped at.
type budgetView struct {
	Limits []limitView
	// Stopped, when the last turn failed at its budget at a limit no longer
	// in force as it was (raised or removed since), says that limit.
	Stopped string
}

// limitView is one limit in force: Name as the configuration names it
// ("turn.tokens"), Label for people ("Turn tokens"), Spent and Limit as
// figures of its kind, Of whose spend it is, From where it was set,
// Reached when the last turn stopped at it.
type limitView struct {
	Name, Label  string
	Spent, Limit string
	Of, From     string
	Reached      bool
}

// budgetOf is the budget the page shows for b at now (a running turn's
// time counted up to now), nil without one.
func budgetOf(b *wire.SessionBudget, now time.Time) *budgetView {
	if b == nil {
		return nil
	}
	v := &budgetView{Limits: make([]limitView, 0, len(b.Limits))}
	marked := false
	for _, l := range b.Limits {
		lv := limitView{Name: l.Name(), Label: limitLabel(l), Spent: figure(l.Kind, b.SpentAt(l, now)),
			Limit: figure(l.Kind, l.Limit), Of: "the current (or last) turn", From: fromLabel(l.From), Reached: b.IsReached(l)}
		if l.Scope == event.ScopeSession {
			lv.Of = "the session's turns together"
		}
		marked = marked || lv.Reached
		v.Limits = append(v.Limits, lv)
	}
	if b.Reached != nil && !marked {
		v.Stopped = b.Reached.String()
	}
	return v
}

// limitLabel names a limit for people: "Turn tokens", "Session cost".
func limitLabel(l event.BudgetReached) string {
	scope := "Turn"
	if l.Scope == event.ScopeSession {
		scope = "Session"
	}
	return scope + " " + event.KindWord(l.Kind)
}

// fromLabel says where a limit was set.
func fromLabel(from string) string {
	switch from {
	case event.FromNode:
		return "the node's agent.budget"
	case event.FromSession:
		return "the session's budget"
	case event.FromInput:
		return "the turn's input"
	}
	return from
}

// figure writes a limit or a spend of a kind of limit: tokens, US dollars
// or milliseconds.
func figure(kind string, v float64) string {
	switch kind {
	case event.LimitTokens:
		return num(int(v))
	case event.LimitCostUSD:
		return pricing.FormatUSD(v)
	case event.LimitTimeMS:
		return (time.Duration(v) * time.Millisecond).Round(time.Second).String()
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
