package client

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

// Approve approves calls of session sid that wait for approval (d.Calls,
// every one when empty; d.Arguments replace the model's arguments of the
// one call named) and returns the turn it moves on once the input is
// stored: its Outcome is the turn's end, or the next wait. A call that
// awaits no approval fails it with a *CommandError of code
// wire.FailureNotPending, one approved or denied before with
// wire.FailureAlreadyDecided.
func (c *Client) Approve(ctx context.Context, sid string, d wire.Decision, opts ...TurnOption) (*Turn, error) {
	return c.decideCalls(ctx, sid, wire.CommandApprove, d, opts)
}

// Deny denies calls of session sid that wait for approval, as Approve
// approves them: the model is told "denied by the user: <d.Note>".
func (c *Client) Deny(ctx context.Context, sid string, d wire.Decision, opts ...TurnOption) (*Turn, error) {
	return c.decideCalls(ctx, sid, wire.CommandDeny, d, opts)
}

func (c *Client) decideCalls(ctx context.Context, sid string, cmd wire.Command, d wire.Decision, opts []TurnOption) (*Turn, error) {
	in := wire.Input{Command: cmd, Decision: &d}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return c.startTurn(ctx, sid, in, opts)
}
