package wire

import (
	"errors"
	"math"

	"github.com/tah-dev/tah/event"
)

// BudgetChange is the body's budget of a budget command: the limits it
// changes, per turn (the session's limit on each of its turns, and the
// current turn's own) and for the session. A limit absent keeps its value;
// a limit given replaces it, 0 removing it.
type BudgetChange struct {
	Turn    *LimitsChange `json:"turn,omitempty"`
	Session *LimitsChange `json:"session,omitempty"`
}

// LimitsChange is the limits a budget command changes in one scope: nil
// keeps a limit, a value replaces it (0: no limit). See event.Limits for
// what each limits.
type LimitsChange struct {
	Tokens  *int64   `json:"tokens,omitempty" jsonschema:"minimum=0"`
	CostUSD *float64 `json:"cost_usd,omitempty" jsonschema:"minimum=0"`
	TimeMS  *int64   `json:"time_ms,omitempty" jsonschema:"minimum=0"`
}

func (c *LimitsChange) empty() bool {
	return c == nil || c.Tokens == nil && c.CostUSD == nil && c.TimeMS == nil
}

func (c *LimitsChange) validate() error {
	if c == nil {
		return nil
	}
	if c.Tokens != nil && *c.Tokens < 0 || c.TimeMS != nil && *c.TimeMS < 0 ||
		c.CostUSD != nil && (*c.CostUSD < 0 || math.IsNaN(*c.CostUSD) || math.IsInf(*c.CostUSD, 0)) {
		return errors.New("a limit is negative or not a number (0 removes a limit)")
	}
	return nil
}

func (c BudgetChange) validate() error {
	if c.Turn.empty() && c.Session.empty() {
		return errors.New("it changes no limit (give turn or session, with tokens, cost_usd or time_ms)")
	}
	if err := c.Turn.validate(); err != nil {
		return err
	}
	return c.Session.validate()
}

// apply is l with the limits c gives.
func (c *LimitsChange) apply(l event.Limits) event.Limits {
	if c == nil {
		return l
	}
	if c.Tokens != nil {
		l.Tokens = *c.Tokens
	}
	if c.CostUSD != nil {
		l.CostUSD = *c.CostUSD
	}
	if c.TimeMS != nil {
		l.TimeMS = *c.TimeMS
	}
	return l
}

// drop is l without the limits c gives: a turn's own limits, which a
// change of the session's turn limits replaces.
func (c *LimitsChange) drop(l event.Limits) event.Limits {
	if c == nil {
		return l
	}
	if c.Tokens != nil {
		l.Tokens = 0
	}
	if c.CostUSD != nil {
		l.CostUSD = 0
	}
	if c.TimeMS != nil {
		l.TimeMS = 0
	}
	return l
}

// Apply is the session's budget b and the current turn's own limits turn
// after the change: the turn limits it names replace the session's and
// remove the turn's own (so that a raise is not undone by the tighter
// limit its input gave).
func (c BudgetChange) Apply(b event.Budget, turn event.Limits) (event.Budget, event.Limits) {
	return event.Budget{Turn: c.Turn.apply(b.Turn), Session: c.Session.apply(b.Session)}, c.Turn.drop(turn)
}

// validLimits reports whether no limit of l is negative or not a number.
func validLimits(l event.Limits) bool {
	return l.Tokens >= 0 && l.TimeMS >= 0 && l.CostUSD >= 0 && !math.IsNaN(l.CostUSD) && !math.IsInf(l.CostUSD, 0)
}
