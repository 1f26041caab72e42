package main

import (
	"context"
	"io"
	"strings"

	"github.com/tah-dev/tah/wire"
)

// maxInputBytes is the largest input tahctl sends, whatever the node's own
// limit (wire.StatusReply.MaxInputBytes, 256 KiB by default), which it asks
// for before it sends: the log records the input in the turn and in every
// LLM step's request, so a larger text belongs in a file the agent reads.
const maxInputBytes = 1 << 20

// tryFile is what to do with an input too large to send.
const tryFile = "put the text in a file under the node's tools root and ask the agent to read it"

const sendHelp = `Sends TEXT to a session and streams the answer as it is written: the
answer on stdout, each tool call and its outcome on one line on stderr, with a
spinner while the model thinks (on a terminal). When stdout is not a terminal
(a file, a pipe) it gets the final answer once, when the turn ends. Without -s
it creates a session first and prints its id. TEXT "-" reads the input from
stdin. If the node stops during the turn, send waits for it to come back (at
the address its node.json names) and follows the turn to its end.

Ctrl-C cancels this command's turn, and no other: an input still queued
behind another turn (one that waits for approval, say) is withdrawn and
never runs. It exits with 130 (once the turn has ended, it exits at once). The exit status says how the turn
ended: 0 completed, 1 failed, 5 cancelled (see below). A tool call that waits
for approval (tools.approval) is shown; on a terminal send asks y/n/edit and
goes on, elsewhere it prints the approve command and exits with 6.
With --json: one JSON object per line: {"kind":"session"}, then "delta",
"event" and finally "outcome".

--budget-tokens, --budget-cost and --budget-time give the turn limits of its
own, beside the session's budget and the node's (the tightest wins). A turn
that reaches one fails (budget_exceeded, exit status 1): send says which
limit, and the tahctl budget command that raises it and goes on.

When the session is busy with a turn, the input waits for it to end (and
for the inputs queued before it). --steer instead joins the running turn at
its next step, before its next LLM call (the model sees the correction
without the turn ending; send then follows that turn to its end, and Ctrl-C
cancels it); a turn that can take it no more leaves it a turn of its own,
ahead of the queue (--max-steps and --budget-* apply to that turn only).
--interrupt cancels the running turn (every tool call answered) and runs
this input next. Both need -s; on an idle session both are a plain send.`

// runSend is `tahctl send [-s ID] TEXT`.
func runSend(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("send", "[-s ID | --tenant NAME] TEXT", sendHelp)
	sid := fs.String("s", "", "continue the session `ID` (default: a new session)")
	fs.StringVar(sid, "session", "", "same as -s `ID`")
	tenant := fs.String("tenant", "", "make the new session one of tenant `NAME`'s (its id NAME.s_…)")
	maxSteps := fs.Int("max-steps", 0, "at most `N` LLM calls in this turn (default: the session's maxSteps)")
	steer := fs.Bool("steer", false, "join the session's running turn at its next step, instead of waiting for it to end")
	interrupt := fs.Bool("interrupt", false, "cancel the session's running turn and run this input next")
	var lf limitFlags
	lf.register(fs, "budget", "0 or absent: no limit of its own")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *maxSteps < 0 {
		return usageError("tahctl send --max-steps 5 TEXT", "--max-steps %d is negative", *maxSteps)
	}
	whenBusy, err := whenBusyOf(*sid, *steer, *interrupt)
	if err != nil {
		return err
	}
	if err := checkTenant(*tenant, *sid); err != nil {
		return err
	}
	text := strings.Join(pos, " ")
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(g.stdin, maxInputBytes+1))
		if err != nil {
			return usageError("", "read the input from stdin: %v", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return usageError(`tahctl send "your question" (or tahctl send - < file.txt)`, "the input is empty")
	}
	if len(text) > maxInputBytes {
		return usageError(tryFile,
			"the input is over %s bytes, the most tahctl sends (the log keeps the input in every step)", num(maxInputBytes))
	}
	if *sid != "" {
		if err := checkID(*sid); err != nil {
			return err
		}
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.checkInputSize(ctx, text); err != nil {
		return err
	}
	created := false
	if *sid == "" {
		r, err := c.Create(ctx, wire.CreateRequest{Tenant: *tenant})
		if err != nil {
			return c.failed(wire.EndpointCreate, err)
		}
		*sid, created = r.Session, true
	} else if _, err := c.getSession(ctx, *sid); err != nil {
		return err
	}
	w := c.watch(*sid)
	defer w.Close()
	if g.json {
		_ = printJSON(g.stdout, map[string]any{"kind": "session", "session": *sid, "created": created})
	} else if created {
		w.note(w.st.dim("session ") + w.st.cyan(*sid) + w.st.dim(" (new; continue it with: tahctl send -s "+*sid+" TEXT)"))
	} else {
		w.note(w.st.dim("session ") + w.st.cyan(*sid))
	}
	in := wire.Input{Text: text}
	if *maxSteps > 0 {
		in.Options = &wire.RunOptions{MaxSteps: *maxSteps}
	}
	if l := limitsOf(lf.turn); !l.IsZero() {
		if in.Options == nil {
			in.Options = &wire.RunOptions{}
		}
		in.Options.Budget = &l
	}
	if whenBusy != "" {
		if in.Options == nil {
			in.Options = &wire.RunOptions{}
		}
		in.Options.WhenBusy = whenBusy
	}
	if err := w.start(ctx, wire.CommandRun, in); err != nil {
		return err
	}
	return w.wait(ctx)
}

// checkInputSize refuses, before anything is created or sent, a text over
// the node's limit (agent.max_input_bytes), which the node would refuse
// (input_too_large). A node that does not say its limit (an older one), or
// does not answer, is left to refuse it itself.
func (c *conn) checkInputSize(ctx context.Context, text string) error {
	st, err := c.Status(ctx)
	if err != nil || st.MaxInputBytes <= 0 || len(text) <= st.MaxInputBytes {
		return nil
	}
	return usageError(tryFile+"; or raise the limit of every node (tah-node --max-input-bytes, agent.max_input_bytes)",
		"the input is %s bytes, over the node's limit of %s bytes (--max-input-bytes): it would refuse it",
		num(len(text)), num(st.MaxInputBytes))
}

// whenBusyOf is the run's when_busy of --steer and --interrupt: either
// needs a session, and not both.
func whenBusyOf(sid string, steer, interrupt bool) (wire.WhenBusy, error) {
	switch {
	case !steer && !interrupt:
		return "", nil
	case steer && interrupt:
		return "", usageError("tahctl send -s ID --steer TEXT (or --interrupt)", "--steer and --interrupt exclude each other")
	case sid == "":
		flag := "--steer"
		if interrupt {
			flag = "--interrupt"
		}
		return "", usageError("tahctl send -s ID "+flag+" TEXT", "%s acts on a session's running turn: name the session with -s", flag)
	case interrupt:
		return wire.WhenBusyInterrupt, nil
	}
	return wire.WhenBusySteer, nil
}
