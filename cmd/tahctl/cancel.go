package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/projection"

	"github.com/tah-dev/tah/wire"
)

const cancelHelp = `Cancels the running turn (or compaction) of a session: the model call and the
running tools see it at once, and the turn ends as cancelled. Cancelling a
session that runs nothing does nothing. Exits 0 in both cases.`

// runCancel is `tahctl cancel ID`.
func runCancel(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("cancel", "ID", cancelHelp)
	reason := fs.String("reason", "cancelled with tahctl", "why, recorded in the log")
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	// The node answers once the cancelled turn has ended (a session that runs
	// nothing, at once): wait for that, a little.
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	o, err := c.Cancel(cctx, id, *reason)
	cancel()
	notYet := "cancel sent to " + id + "; its turn has not ended yet (`tahctl show " + id + "` tells)"
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(g.stdout, notYet)
		return nil
	}
	if err != nil {
		return c.inputFailed(id, wire.CommandCancel, err)
	}
	if g.json {
		return printJSON(g.stdout, o)
	}
	switch {
	case !o.WasRunning:
		fmt.Fprintf(g.stdout, "%s was not running (it is %s): nothing to cancel\n", id, o.Status)
	case o.Status.Active(): // its node stopped first: the next owner carries the cancel out
		fmt.Fprintln(g.stdout, notYet)
	case o.Status == projection.StatusCancelled:
		fmt.Fprintf(g.stdout, "cancelled turn %d of %s: %s\n", o.Turn, id, o.Error)
	default:
		fmt.Fprintf(g.stdout, "turn %d of %s ended %s before the cancel reached it\n", o.Turn, id, o.Status)
	}
	return nil
}
