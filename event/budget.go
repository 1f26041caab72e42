package event

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Budgets: limits on what a turn and a session may spend (tokens, cost,
// wall time). Three sources set them: the node's configuration
// (Config.Budget, restated with every claim), the session's own budget (at
// create, SessionCreatedData.Budget, then budget.set) and the turn's own
// (the input's, TurnStartedData.Budget). For each limit the tightest of
// them is in force (Effective). The owner checks them before each LLM call
// and after each step; a turn that reaches one fails with code
// budget_exceeded and agent.failed's Budget says which, at what figure.
// budget.set raises (or lowers) the session's budget, and a resume then
// reopens the turn (turn.reopened) and runs it on.

// Limits are the limits of one scope (a turn, or the whole session). A zero
// field is no limit.
type Limits struct {
	// Tokens is the most input plus output tokens of the scope's LLM calls.
	Tokens int64 `json:"tokens,omitempty" jsonschema:"minimum=0"`
	// CostUSD is the most the scope's LLM calls may cost, in US dollars, by
	// the costs their events recorded (calls without a price count nothing).
	CostUSD float64 `json:"cost_usd,omitempty" jsonschema:"minimum=0"`
	// TimeMS is the most wall time the scope's turns may run, in
	// milliseconds: from turn.started (or turn.reopened) to the turn's end,
	// waits for tools and for approval included.
	TimeMS int64 `json:"time_ms,omitempty" jsonschema:"minimum=0"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

func (l Limits) validate() error {
	if l.Tokens < 0 || l.CostUSD < 0 || l.TimeMS < 0 || math.IsNaN(l.CostUSD) || math.IsInf(l.CostUSD, 0) {
		return errors.New("a budget limit is negative or not a number")
	}
	return nil
}

// Budget is a set of limits per turn and per session.
type Budget struct {
	// Turn limits each turn.
	Turn Limits `json:"turn,omitzero"`
	// Session limits the session's turns together, from its first.
	Session Limits `json:"session,omitzero"`
}

// IsZero reports whether b limits nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate reports a limit of b that is negative or not a number.
func (b Budget) Validate() error { return b.validate() }

func (b Budget) validate() error {
	if err := b.Turn.validate(); err != nil {
		return err
	}
	return b.Session.validate()
}

// The kinds of limit, as BudgetReached.Kind names them.
const (
	LimitTokens  = "tokens"
	LimitCostUSD = "cost_usd"
	LimitTimeMS  = "time_ms"
)

// The scopes of a limit, as BudgetReached.Scope names them.
const (
	ScopeTurn    = "turn"
	ScopeSession = "session"
)

// The sources of a limit, as BudgetReached.From names them.
const (
	// FromNode: the node's configuration (agent.budget).
	FromNode = "node"
	// FromSession: the session's own budget (at create, or budget.set).
	FromSession = "session"
	// FromInput: the turn's own, its input's options.budget.
	FromInput = "input"
)

// CodeBudgetExceeded: the turn reached one of its budget's limits
// (agent.failed's Budget says which). Raise it (budget.set) and resume.
const CodeBudgetExceeded = "budget_exceeded"

// BudgetReached says which limit a turn reached, and at what figure.
type BudgetReached struct {
	// Scope is "turn" or "session"; Kind "tokens", "cost_usd" or
	// "time_ms"; From where the limit was set: "node", "session" or
	// "input".
	Scope string `json:"scope"`
	Kind  string `json:"kind"`
	From  string `json:"from"`
	// Limit is the limit in force, Spent the scope's spend when it was
	// checked: tokens, US dollars or milliseconds, as Kind says.
	Limit float64 `json:"limit"`
	Spent float64 `json:"spent"`
}

// Name is the limit's name as a setting of the node's configuration
// says it, e.g. "turn.cost_usd".
func (r BudgetReached) Name() string { return r.Scope + "." + r.Kind }

// KindWord is a kind of limit as people (and tahctl budget's flags, e.g.
// --turn-cost) name it: "tokens", "cost" or "time".
func KindWord(kind string) string {
	switch kind {
	case LimitCostUSD:
		return "cost"
	case LimitTimeMS:
		return "time"
	}
	return kind
}

// FromWords says where a limit was set, for people: "the node's
// agent.budget", "the session's budget" or "the input's options.budget".
func FromWords(from string) string {
	switch from {
	case FromNode:
		return "the node's agent.budget"
	case FromSession:
		return "the session's budget"
	case FromInput:
		return "the input's options.budget"
	}
	return from
}

// String says it for a person, e.g. "the session's cost limit of $5.00
// (set for the session): $5.02 spent".
func (r BudgetReached) String() string {
	scope := "the turn's"
	if r.Scope == ScopeSession {
		scope = "the session's"
	}
	from := FromWords(r.From)
	var what, limit, spent string
	switch r.Kind {
	case LimitTokens:
		what, limit, spent = "token", strconv.FormatFloat(r.Limit, 'f', 0, 64), strconv.FormatFloat(r.Spent, 'f', 0, 64)+" tokens"
	case LimitCostUSD:
		what, limit, spent = "cost", fmt.Sprintf("$%.2f", r.Limit), fmt.Sprintf("$%.4f", r.Spent)
	case LimitTimeMS:
		what = "time"
		limit = time.Duration(r.Limit * float64(time.Millisecond)).Round(time.Millisecond).String()
		spent = time.Duration(r.Spent*float64(time.Millisecond)).Round(time.Millisecond).String() + " run"
	default:
		what, limit, spent = r.Kind, strconv.FormatFloat(r.Limit, 'g', -1, 64), strconv.FormatFloat(r.Spent, 'g', -1, 64)
	}
	return fmt.Sprintf("%s %s limit of %s (from %s) is reached: %s", scope, what, limit, from, spent)
}

// Spend is what a turn and its session have spent, against which a budget
// is checked.
type Spend struct {
	Turn, Session Limits
}

// Effective is, for each limit, the tightest of the node's budget, the
// session's and the turn's own (turn limits only), with where it comes from:
// a limit set nowhere is absent from the result.
func Effective(node, session Budget, turn Limits) []BudgetReached {
	var out []BudgetReached
	pick := func(scope, kind string, sources ...float64) {
		froms := []string{FromNode, FromSession, FromInput}
		best, from := 0.0, ""
		for i, v := range sources {
			if v > 0 && (best == 0 || v < best) {
				best, from = v, froms[i]
			}
		}
		if best > 0 {
			out = append(out, BudgetReached{Scope: scope, Kind: kind, From: from, Limit: best})
		}
	}
	pick(ScopeTurn, LimitTokens, float64(node.Turn.Tokens), float64(session.Turn.Tokens), float64(turn.Tokens))
	pick(ScopeTurn, LimitCostUSD, node.Turn.CostUSD, session.Turn.CostUSD, turn.CostUSD)
	pick(ScopeTurn, LimitTimeMS, float64(node.Turn.TimeMS), float64(session.Turn.TimeMS), float64(turn.TimeMS))
	pick(ScopeSession, LimitTokens, float64(node.Session.Tokens), float64(session.Session.Tokens))
	pick(ScopeSession, LimitCostUSD, node.Session.CostUSD, session.Session.CostUSD)
	pick(ScopeSession, LimitTimeMS, float64(node.Session.TimeMS), float64(session.Session.TimeMS))
	return out
}

// Reached is the first limit of limits (Effective's) that spend has reached,
// with its spend filled in, or nil.
func Reached(limits []BudgetReached, spend Spend) *BudgetReached {
	for _, l := range limits {
		s := spend.Turn
		if l.Scope == ScopeSession {
			s = spend.Session
		}
		var v float64
		switch l.Kind {
		case LimitTokens:
			v = float64(s.Tokens)
		case LimitCostUSD:
			v = s.CostUSD
		case LimitTimeMS:
			v = float64(s.TimeMS)
		}
		if v >= l.Limit {
			r := l
			r.Spent = v
			return &r
		}
	}
	return nil
}

// BudgetSetData is the payload of budget.set: the session's budget from
// now on, and the current turn's own limits (the input's, as a raise of the
// turn's limits replaced them). Log schema version 5.
type BudgetSetData struct {
	Budget Budget `json:"budget"`
	// TurnLimits are the current (or last) turn's own limits after the
	// change: its input's, but for those the change named.
	TurnLimits Limits `json:"turn_limits,omitzero"`
	// By says who changed it, as the client said (informative).
	By string `json:"by,omitempty"`
}

func (d BudgetSetData) validate() error {
	if err := d.Budget.validate(); err != nil {
		return err
	}
	return d.TurnLimits.validate()
}

// TurnReopenedData is the payload of turn.reopened: the turn that failed at
// its budget runs on (a resume, once the budget allows it). Log schema
// version 5.
type TurnReopenedData struct {
	// Turn is the reopened turn's number: the last turn's.
	Turn int `json:"turn"`
	// After is the code the turn had failed with: budget_exceeded.
	After string `json:"after"`
}

func (d TurnReopenedData) validate() error {
	if d.Turn < 1 {
		return errors.New("turn is below 1")
	}
	return nil
}
