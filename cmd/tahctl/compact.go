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
	o, err := c.command(ctx, "compact", id, nil, max(g.timeout, 10*time.Minute))
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"session": id, "compacted": o.Compact != nil, "turns": turns(o), "chars": chars(o)})
	}
	if o.Compact == nil {
		fmt.Fprintf(g.stdout, "%s has no turn to compact\n", id)
		return nil
	}
	fmt.Fprintf(g.stdout, "compacted %s of %s into a summary of %s characters\n", plural(o.Compact.Turns, "turn"), id, num(o.Compact.Chars))
	return nil
}

func turns(o wire.Outcome) int {
	if o.Compact == nil {
		return 0
	}
	return o.Compact.Turns
}

func chars(o wire.Outcome) int {
	if o.Compact == nil {
		return 0
	}
	return o.Compact.Chars
}
