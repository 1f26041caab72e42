package main

import (
	"context"
	"fmt"
	"time"

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
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	o, err := c.Cancel(cctx, id, *reason)
	cancel()
	if err != nil {
		return c.inputFailed(id, wire.CommandCancel, err)
	}
	was := o.Status
	final := was
	if was.Active() {
		// The cancel reached the turn; wait (a little) for the log to say it ended.
		deadline := time.Now().Add(g.timeout)
		for time.Now().Before(deadline) {
			v, err := c.getSession(ctx, id)
			if err != nil {
				return err
			}
			if final = v.Status; !final.Active() {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"session": id, "was": was, "status": final})
	}
	switch {
	case !was.Active():
		fmt.Fprintf(g.stdout, "%s was not running (it is %s): nothing to cancel\n", id, was)
	case final.Active():
		fmt.Fprintf(g.stdout, "cancel sent to %s; its turn has not ended yet (`tahctl show %s` tells)\n", id, id)
	default:
		fmt.Fprintf(g.stdout, "cancelled the running turn of %s (now %s)\n", id, final)
	}
	return nil
}
