package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

const approveHelp = `Approves a tool call that waits for approval (every waiting call of the
session when CALL is not given), and follows the turn it moves on, as send
does. --args replaces the call's arguments (a JSON object; with one CALL).
The exit status is send's: 0 completed, 1 failed, 5 cancelled, 6 another
call waits for approval.`

const denyHelp = `Denies a tool call that waits for approval (every waiting call of the
session when CALL is not given): the call does not run, and the model is told
"denied by the user: NOTE". Follows the turn as send does.`

// runApprove is `tahctl approve ID [CALL] [--args JSON] [--note TEXT]`.
func runApprove(ctx context.Context, g *globals, args []string) error {
	return runDecision(ctx, g, wire.CommandApprove, approveHelp, args)
}

// runDeny is `tahctl deny ID [CALL] --note TEXT`.
func runDeny(ctx context.Context, g *globals, args []string) error {
	return runDecision(ctx, g, wire.CommandDeny, denyHelp, args)
}

func runDecision(ctx context.Context, g *globals, cmd wire.Command, help string, args []string) error {
	fs := g.flags(string(cmd), "ID [CALL]", help)
	note := fs.String("note", "", "a note recorded with the decision (told to the model on deny)")
	var edited *string
	if cmd == wire.CommandApprove {
		edited = fs.String("args", "", "run the call with these arguments instead (a JSON `object`)")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || len(pos) > 2 {
		return usageError("`tahctl "+string(cmd)+" ID [CALL]`; `tahctl show ID` lists the waiting calls", "%s takes a session id and at most one call id", cmd)
	}
	if err := checkID(pos[0]); err != nil {
		return err
	}
	d := wire.Decision{Note: *note, Calls: pos[1:]}
	if edited != nil && *edited != "" {
		d.Arguments = json.RawMessage(*edited)
	}
	if err := (wire.Input{Command: cmd, Decision: &d}).Validate(); err != nil {
		return usageError("`tahctl "+string(cmd)+" --help`", "%v", err)
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.getSession(ctx, pos[0]); err != nil {
		return err
	}
	w := c.watch(pos[0])
	defer w.Close()
	if err := w.decide(ctx, cmd, d); err != nil {
		return err
	}
	return w.wait(ctx)
}

// decide publishes an approve or a deny, by this credential, and follows the
// turn it moves on.
func (w *watch) decide(ctx context.Context, cmd wire.Command, d wire.Decision) error {
	d.By = w.c.by()
	w.started = time.Now()
	var err error
	if cmd == wire.CommandApprove {
		w.turn, err = w.c.Approve(ctx, w.sid, d, client.WithEvents(), client.WithDeltas())
	} else {
		w.turn, err = w.c.Deny(ctx, w.sid, d, client.WithEvents(), client.WithDeltas())
	}
	return w.c.inputFailed(w.sid, cmd, err)
}

// by names who decides: the credential's name (its file's, without .creds).
func (c *conn) by() string {
	if c.ep.creds == "" {
		return ""
	}
	return strings.TrimSuffix(filepath.Base(c.ep.creds), ".creds")
}

// awaitingApproval shows the calls o waits for. On a terminal (stdin and
// stderr both) it asks, for each, y (approve), n (deny) or e (approve with
// edited arguments) and follows the turn on; elsewhere, or when the input
// ends before an answer, it prints the commands that decide and returns
// exit status 6.
func (w *watch) awaitingApproval(ctx context.Context, o wire.Outcome) error {
	for _, call := range o.AwaitingApproval {
		w.note(w.st.yellow(fmt.Sprintf("? %s(%s) waits for approval (call %s)", call.Name, call.Arguments, call.ID)))
	}
	if !w.json && isTerminal(w.g.stderr) && isTerminal(w.g.stdin) {
		err := w.ask(ctx, o.AwaitingApproval[0].ID)
		if !errors.Is(err, errNoAnswer) {
			return err
		}
		fmt.Fprintln(w.g.stderr)
		w.note(w.st.dim("  no answer (the input ended): nothing was decided"))
	}
	if !o.ApprovalDeadline.IsZero() {
		w.note(w.st.dim("  denied at " + o.ApprovalDeadline.Local().Format("2006-01-02 15:04:05") + " unless decided"))
	}
	w.note(w.st.dim("  approve: tahctl approve " + w.sid + " " + o.AwaitingApproval[0].ID))
	w.note(w.st.dim("  deny:    tahctl deny " + w.sid + " " + o.AwaitingApproval[0].ID + " --note WHY"))
	return exitStatus(exitAwaitingApproval)
}

// errNoAnswer: the input ended before a person answered. The end of input is
// never a decision: the call stays waiting.
var errNoAnswer = errors.New("no answer")

// ask asks on the terminal whether to run call and follows the turn on. It
// asks again after an answer it does not know, and returns errNoAnswer,
// deciding nothing, when the input ends first.
func (w *watch) ask(ctx context.Context, call string) error {
	in := bufio.NewReader(w.g.stdin)
	line := func(prompt string) (string, error) {
		fmt.Fprint(w.g.stderr, prompt)
		s, err := in.ReadString('\n')
		if err != nil && (err != io.EOF || s == "") {
			return "", errNoAnswer
		}
		return strings.TrimSpace(s), nil
	}
	d := wire.Decision{Calls: []string{call}}
	var cmd wire.Command
	for cmd == "" {
		answer, err := line("  run it? [y]es / [n]o / [e]dit the arguments: ")
		if err != nil {
			return err
		}
		switch strings.ToLower(answer) {
		case "y", "yes":
			cmd = wire.CommandApprove
		case "e", "edit":
			args, err := line("  arguments (a JSON object): ")
			if err != nil {
				return err
			}
			cmd, d.Arguments = wire.CommandApprove, json.RawMessage(args)
		case "n", "no":
			note, err := line("  why (told to the model): ")
			if err != nil {
				return err
			}
			cmd, d.Note = wire.CommandDeny, note
		}
	}
	if err := w.decide(ctx, cmd, d); err != nil {
		return err
	}
	w.end = nil
	return w.wait(ctx)
}
