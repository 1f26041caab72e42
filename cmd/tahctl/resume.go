package main

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

const resumeHelp = `Continues a turn that a crash or a stop interrupted, from where the log
stops (a completed tool call is never run again), and streams the rest as send
does. A node also resumes such a turn by itself when the input that started it
comes back to it; resume does it now.`

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
	w := c.watch(id)
	defer w.Close()
	if g.json {
		_ = printJSON(g.stdout, map[string]any{"kind": "session", "session": id, "created": false})
	} else {
		w.note(w.st.dim("resuming ") + w.st.cyan(id))
	}
	if err := w.start(ctx, wire.CommandResume, wire.Input{}); err != nil {
		return err
	}
	return w.wait(ctx)
}
