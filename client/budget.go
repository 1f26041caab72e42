package client

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/wire"
)

// SetBudget changes session sid's own budget (the budget command, recorded
// in budget.set): each limit change gives, per turn and for the session,
// replaces that limit (0 removes it), and a limit it leaves nil is kept. A
// turn limit it gives also replaces the current turn's own (its input's
// options.budget), so that a raise is not undone by a tighter one the
// input gave. The node's agent.budget, when tighter, still wins. by names
// who changed it (informative, as wire.Decision.By; empty: nobody named).
//
// It returns the command's outcome once the node recorded the change: the
// session's Status and, in LastSeq, the change's place in the log. A turn
// that failed at its budget (code budget_exceeded) does not go on by
// itself: Resume runs it on once the budget allows it.
//
// It fails with ErrMalformedInput, nothing sent, for a change of no limit
// or a negative one, and with ErrNotFound when the session does not exist:
// that is asked first, so that a mistyped id is told at once.
func (c *Client) SetBudget(ctx context.Context, sid string, change wire.BudgetChange, by string) (wire.Outcome, error) {
	in := wire.Input{Command: wire.CommandBudget, Budget: &change}
	if by != "" {
		in.Decision = &wire.Decision{By: by}
	}
	if err := in.Validate(); err != nil {
		return wire.Outcome{}, fmt.Errorf("budget input for %s: %w", sid, err)
	}
	if _, err := c.Get(ctx, sid); err != nil {
		return wire.Outcome{}, err
	}
	return c.await(ctx, sid, in)
}
