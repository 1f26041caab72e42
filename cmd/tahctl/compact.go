package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tah-dev/tah/wire"
)

const compactHelp = `Summarises every turn of a session so far into one message (the full history
is kept; the model is sent the summary instead of the turns). Refused while a
turn runs.`

// runCompact is `tahctl compact ID`.
func runCompact(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("compact", "ID", compactHelp)
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	// A summary is an LLM call: give it the time of one.
	cctx, cancel := context.WithTimeout(ctx, max(g.timeout, 10*time.Minute))
	r, err := c.Compact(cctx, id)
	cancel()
	if err != nil {
		return c.inputFailed(id, wire.CommandCompact, err)
	}
	compacted := r != nil
	if !compacted {
		r = &wire.CompactResult{}
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"session": id, "compacted": compacted, "turns": r.Turns, "chars": r.Chars})
	}
	if !compacted {
		fmt.Fprintf(g.stdout, "%s has no turn to compact\n", id)
		return nil
	}
	fmt.Fprintf(g.stdout, "compacted %s of %s into a summary of %s characters\n", plural(r.Turns, "turn"), id, num(r.Chars))
	return nil
}
