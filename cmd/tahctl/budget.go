package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

const budgetArgs = "ID [--turn-tokens N] [--turn-cost USD] [--turn-time DURATION] [--session-tokens N] [--session-cost USD] [--session-time DURATION] [--resume]"

const budgetHelp = `Changes a session's own budget: its limits on each of its turns (--turn-*)
and on its turns together (--session-*), in tokens (input plus output), US
dollars (as the node's price table prices the model calls) and wall time
(90s, 5m, 1h). A limit given replaces the session's, 0 removes it; a limit
not given is kept. A turn limit also replaces the current turn's own (send
--budget-*), so that a raise is not undone by it. The node's agent.budget,
when tighter, still wins: no session's budget raises it.

Then prints the limits in force, each with what its scope has spent and where
it was set (node, session or input). A turn that stopped at its budget does
not go on by itself: --resume resumes it and streams it as resume does (the
exit status is then resume's). With --json: one JSON object of kind
"budget" (the command's outcome and the budget in force), then, with
--resume, resume's lines.`

// runBudget is `tahctl budget ID [limits] [--resume]`.
func runBudget(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("budget", budgetArgs, budgetHelp)
	var lf limitFlags
	lf.register(fs, "", "0 removes the limit")
	resume := fs.Bool("resume", false, "then resume the turn that stopped at its budget, and stream it as resume does")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	change := lf.change()
	if change == nil {
		return usageError("`tahctl budget "+id+" --turn-tokens 100000`; `tahctl budget --help` lists the limits",
			"no limit given: give at least one of --turn-tokens, --turn-cost, --turn-time, --session-tokens, --session-cost, --session-time (0 removes a limit)")
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.getSession(ctx, id); err != nil {
		return err
	}
	// The change waits behind work the session runs (a turn, not a wait
	// for approval): bounded, so that tahctl does not hang on a long turn;
	// the change stays stored, and applies when that work ends.
	sctx, cancel := context.WithTimeout(ctx, g.timeout)
	o, err := c.SetBudget(sctx, id, *change, c.by())
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return errorf(exitUnavailable, "`tahctl show "+id+"` shows the budget once it applies; raise --timeout to wait longer",
			"the budget change was sent but not applied within %v: it waits behind the session's running turn, and applies when that ends", g.timeout)
	}
	if err != nil {
		return c.inputFailed(id, wire.CommandBudget, err)
	}
	b, caughtUp := c.budgetAfter(ctx, id, o.LastSeq)
	if g.json {
		line := budgetJSON{Kind: "budget", Session: id, Outcome: o}
		if caughtUp {
			line.Budget = b // null: no limit in force
		}
		_ = printJSON(g.stdout, line)
	} else {
		printBudget(g, id, b, caughtUp)
	}
	if !*resume {
		return nil
	}
	return c.resume(ctx, id)
}

// budgetJSON is budget's line with --json.
type budgetJSON struct {
	Kind    string       `json:"kind"`
	Session string       `json:"session"`
	Outcome wire.Outcome `json:"outcome"`
	// Budget is the limits in force after the change, a *wire.SessionBudget
	// (null: none); absent when the read model had not applied the change
	// in time to say.
	Budget any `json:"budget,omitempty"`
}

// budgetAfter is session id's budget once the read model has applied the
// log up to seq (the budget.set), asked again until it has, for as long as
// a request may take. caughtUp is false when it had not by then.
func (c *conn) budgetAfter(ctx context.Context, id string, seq uint64) (b *wire.SessionBudget, caughtUp bool) {
	deadline := time.Now().Add(c.g.timeout)
	for {
		s, err := c.Get(ctx, id)
		if err == nil && s.LastSeq >= seq {
			return s.Budget, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// printBudget says the limits in force after a change, per scope.
func printBudget(g *globals, id string, b *wire.SessionBudget, caughtUp bool) {
	st := newStyle(g, g.stdout)
	w := g.stdout
	if !caughtUp {
		fmt.Fprintf(w, "budget of %s changed; `tahctl show %s` shows the limits in force once the read model has the change\n", id, id)
		return
	}
	fmt.Fprintf(w, "budget of %s changed; in force now:\n", id)
	now := time.Now()
	for _, scope := range []string{event.ScopeTurn, event.ScopeSession} {
		var parts []string
		if b != nil {
			for _, l := range b.Limits {
				if l.Scope != scope {
					continue
				}
				part := fmt.Sprintf("%s %s of %s (%s)", event.KindWord(l.Kind), budgetFigure(l.Kind, b.SpentAt(l, now)), budgetFigure(l.Kind, l.Limit), l.From)
				if b.SpentAt(l, now) >= l.Limit {
					part += " " + st.red("reached")
				}
				parts = append(parts, part)
			}
		}
		if len(parts) == 0 {
			parts = []string{st.dim("none")}
		}
		fmt.Fprintf(w, "  %-8s %s\n", scope, strings.Join(parts, " · "))
	}
}

// raiseHint says what to run to go on after limit r stopped session sid's
// turn: the budget command that raises it, or, for a limit of the node's
// configuration (which no session's budget raises), where to raise it.
func raiseHint(sid string, r event.BudgetReached) string {
	flagName, arg, key := limitFlag(r.Kind)
	if r.From == event.FromNode {
		return fmt.Sprintf("the node's agent.budget.%s.%s is the tightest limit, which no session's budget raises: raise it on the nodes (tah-node --budget-%s-%s), then: tahctl resume %s",
			r.Scope, key, r.Scope, strings.ReplaceAll(key, "_", "-"), sid)
	}
	return fmt.Sprintf("raise it: tahctl budget %s --%s-%s %s --resume", sid, r.Scope, flagName, arg)
}

// limitFlag is a kind of limit as the flags name it: the flag's kind
// (turn-KIND) and argument, and the key of the node's agent.budget.
func limitFlag(kind string) (flagName, arg, key string) {
	switch kind {
	case event.LimitCostUSD:
		return "cost", "USD", "cost_usd"
	case event.LimitTimeMS:
		return "time", "DURATION", "time"
	}
	return "tokens", "N", "tokens"
}

// limitFlags are the limit flags of budget and new (--turn-tokens ...
// --session-time) or, with a prefix, of send (--budget-tokens ...): each
// one given is set.
type limitFlags struct{ turn, session wire.LimitsChange }

// register defines the flags on fs: the turn's and the session's, or, with
// a prefix, only the turn's, named prefix-tokens, prefix-cost and
// prefix-time. zero says what 0 does.
func (l *limitFlags) register(fs *flag.FlagSet, prefix, zero string) {
	scopes := []struct {
		name, what string
		c          *wire.LimitsChange
	}{{"turn", "each turn", &l.turn}, {"session", "the session's turns together", &l.session}}
	if prefix != "" {
		scopes = []struct {
			name, what string
			c          *wire.LimitsChange
		}{{prefix, "this turn", &l.turn}}
	}
	for _, s := range scopes {
		fs.Var(tokensFlag{&s.c.Tokens}, s.name+"-tokens", "at most `N` tokens (input plus output) for "+s.what+" ("+zero+")")
		fs.Var(costFlag{&s.c.CostUSD}, s.name+"-cost", "at most `USD` US dollars for "+s.what+", such as 0.50 ("+zero+")")
		fs.Var(timeFlag{&s.c.TimeMS}, s.name+"-time", "at most `DURATION` of wall time for "+s.what+", such as 90s or 5m ("+zero+")")
	}
}

// change is the budget change the flags give; nil when none was given.
func (l *limitFlags) change() *wire.BudgetChange {
	var c wire.BudgetChange
	if given(l.turn) {
		c.Turn = &l.turn
	}
	if given(l.session) {
		c.Session = &l.session
	}
	if c.Turn == nil && c.Session == nil {
		return nil
	}
	return &c
}

// budget is the budget the flags give (0 and absent: no limit); nil when
// they give none.
func (l *limitFlags) budget() *event.Budget {
	b := event.Budget{Turn: limitsOf(l.turn), Session: limitsOf(l.session)}
	if b.IsZero() {
		return nil
	}
	return &b
}

func given(c wire.LimitsChange) bool { return c.Tokens != nil || c.CostUSD != nil || c.TimeMS != nil }

// limitsOf is the limits c gives, those it does not give zero (none).
func limitsOf(c wire.LimitsChange) event.Limits {
	var l event.Limits
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

// errNegativeLimit is the error of a limit flag below zero.
var errNegativeLimit = errors.New("a limit cannot be negative (0 means no limit)")

// tokensFlag is a limit in tokens: a whole number, digits grouped with _
// or , if one likes.
type tokensFlag struct{ p **int64 }

func (f tokensFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return strconv.FormatInt(**f.p, 10)
}

func (f tokensFlag) Set(s string) error {
	v, err := strconv.ParseInt(strings.NewReplacer("_", "", ",", "").Replace(s), 10, 64)
	if err != nil {
		return errors.New("not a whole number of tokens, such as 100000")
	}
	if v < 0 {
		return errNegativeLimit
	}
	*f.p = &v
	return nil
}

// costFlag is a limit in US dollars, with or without a $.
type costFlag struct{ p **float64 }

func (f costFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return strconv.FormatFloat(**f.p, 'f', -1, 64)
}

func (f costFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("not a number of US dollars, such as 0.50")
	}
	if v < 0 {
		return errNegativeLimit
	}
	*f.p = &v
	return nil
}

// timeFlag is a limit of wall time, kept in milliseconds.
type timeFlag struct{ p **int64 }

func (f timeFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return (time.Duration(**f.p) * time.Millisecond).String()
}

func (f timeFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration: a number with a unit, such as 90s, 5m or 1h")
	}
	if d < 0 {
		return errNegativeLimit
	}
	if d > 0 && d < time.Millisecond {
		return errors.New("under a millisecond, the smallest time limit")
	}
	v := d.Milliseconds()
	*f.p = &v
	return nil
}

// budgetRefused is the error of a resume that the budget still stops: the
// node's message names the limit; the Try line says what raises it, from
// the limit the read model has reached (the node's message, when it has
// none yet).
func (c *conn) budgetRefused(ctx context.Context, sid, msg string, still *event.BudgetReached) error {
	try := "raise the limit it names: `tahctl budget " + sid + " --turn-tokens N --resume` (or --turn-cost, --turn-time, --session-...); `tahctl show " + sid + "` shows the budget"
	if still != nil { // the node says which limit stops the turn now
		return errorf(exitFailed, raiseHint(sid, *still), "%s", msg)
	}
	if s, err := c.Get(ctx, sid); err == nil && s.Budget != nil {
		now := time.Now()
		for _, l := range s.Budget.Limits {
			if s.Budget.SpentAt(l, now) >= l.Limit {
				try = raiseHint(sid, l)
				break
			}
		}
	}
	return errorf(exitFailed, try, "%s", msg)
}
