package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

const forkHelp = `Copies a session's messages into a new session and prints the new id (on its
own line, for scripts); the source is unchanged. --turns N keeps only the first
N turns (0: only the system message): go back to turn N and try another way.`

// runFork is `tahctl fork ID [--turns N]`.
func runFork(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("fork", "ID [--turns N]", forkHelp)
	turns := fs.Int("turns", -1, "keep the first `N` turns (default: all)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	if *turns < -1 {
		return usageError("--turns 0 keeps only the system message; leave it out to keep every turn", "--turns %d is negative", *turns)
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.getSession(ctx, id); err != nil {
		return err
	}
	req := wire.ForkRequest{Session: id}
	if *turns >= 0 {
		req.Turns = turns
	}
	r, err := c.Fork(ctx, req)
	if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Code == wire.APIErrBadRequest {
		return errorf(exitUsage, "`tahctl show "+id+"` shows its turns", "%s", ae.Message)
	}
	if err != nil {
		return c.failed(wire.EndpointFork, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	_, err = fmt.Fprintln(g.stdout, r.Session)
	return err
}
