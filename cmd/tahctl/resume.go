package main

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

const resumeHelp = `Continues a turn that a crash or a stop interrupted, from where the log
stops (a completed tool call is never run again), and streams the rest as send
does. A node also resumes such a turn by itself when the input that started it
comes back to it; resume does it now. A turn that stopped at its budget
(budget_exceeded) goes on once the limit it reached is raised (tahctl budget
ID ... --resume does both); until then resume is refused, naming the limit.`

// runResume is `tahctl resume ID`.
func runResume(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("resume", "ID", resumeHelp)
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.getSession(ctx, id); err != nil {
		return err
	}
	return c.resume(ctx, id)
}

// resume resumes session id's turn and streams it to its end, as send
// does: `tahctl resume`, and `tahctl budget --resume` after a raise.
func (c *conn) resume(ctx context.Context, id string) error {
	w := c.watch(id)
	defer w.Close()
	if c.g.json {
		_ = printJSON(c.g.stdout, map[string]any{"kind": "session", "session": id, "created": false})
	} else {
		w.note(w.st.dim("resuming ") + w.st.cyan(id))
	}
	if err := w.start(ctx, wire.CommandResume, wire.Input{}); err != nil {
		return err
	}
	return w.wait(ctx)
}
