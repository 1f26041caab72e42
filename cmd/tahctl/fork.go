package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

const forkHelp = `Copies a session's messages into a new session and prints the new id (on its
own line, for scripts); the source is unchanged. --turns N keeps only the first
N turns (0: only the system message): go back to turn N and try another way.

--at STEP ends the copy right after that step (its # in the timeline of
tahctl show, or its id): after a model call, its answer; after a tool step,
its result. When the turn went on from there, the fork's turn is open (its
status running): tahctl resume NEW runs it on from that point, with the real
model and tools (tahctl send -s NEW runs it on first, then the new message).

--edit FILE replaces one message of the copy, and the fork's log records the
edit (session.edited: which message, from what, to what, by whom: this
credential's name). FILE (- for stdin) is a JSON object:

  {"content": "..."}                       the --at step's result or answer
  {"step": 4, "content": "..."}            a tool step's result, or a model
                                           call's answer (# or id)
  {"tool_result": "call_1", "content": ...} the result of that tool call
  {"turn": 2, "content": "..."}            turn 2's user message
  {"message": 5, "content": "..."}         the copy's message 5 (0: system)

and, for a tool result, "is_error": true or false. "What if the tool had
returned X" is one command, then a resume:

  tahctl fork SID --at 4 --edit x.json     (x.json: {"content": "X"})
  tahctl resume NEW`

// runFork is `tahctl fork ID [--turns N | --at STEP] [--edit FILE]`.
func runFork(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("fork", "ID [--turns N | --at STEP] [--edit FILE]", forkHelp)
	turns := fs.Int("turns", -1, "keep the first `N` turns (default: all)")
	at := fs.String("at", "", "end the copy right after `STEP` (its # in tahctl show, or its id)")
	editFile := fs.String("edit", "", "replace one message of the copy as `FILE` says (JSON; - for stdin)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	switch {
	case *turns < -1:
		return usageError("--turns 0 keeps only the system message; leave it out to keep every turn", "--turns %d is negative", *turns)
	case *turns >= 0 && *at != "":
		return usageError("give --turns N or --at STEP", "--turns and --at both say where the fork ends")
	}
	var edit *forkEditFile
	if *editFile != "" {
		if edit, err = readForkEdit(g, *editFile); err != nil {
			return err
		}
		if edit.names() == 0 && *at == "" {
			return usageError(`name the message in FILE ("step", "tool_result", "turn" or "message"), or give --at STEP`,
				"%s names no message, and there is no --at step to edit", *editFile)
		}
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
	if *at != "" {
		if req.AtStep, err = c.anyStepID(ctx, id, *at); err != nil {
			return err
		}
	}
	if edit != nil {
		if req.Edit, err = edit.request(ctx, c, id, req.AtStep); err != nil {
			return err
		}
		req.Edit.By = c.by()
	}
	r, err := c.Fork(ctx, req)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == wire.APIErrBadRequest:
		return errorf(exitUsage, "`tahctl show "+id+"` shows its turns and steps", "%s", ae.Message)
	case errors.As(err, &ae) && ae.Code == wire.APIErrNotFound:
		return errorf(exitNotFound, "`tahctl show "+id+"` lists its steps (the # column), `--json` their ids", "%s", ae.Message)
	case err != nil:
		return c.failed(wire.EndpointFork, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	if _, err := fmt.Fprintln(g.stdout, r.Session); err != nil {
		return err
	}
	forkNotes(g, r)
	return nil
}

// forkNotes tells, on stderr, what a fork at a step or with an edit made
// of the copy, and what to do next.
func forkNotes(g *globals, r wire.ForkReply) {
	st := newStyle(g, g.stderr)
	if e := r.Edit; e != nil {
		what := fmt.Sprintf("message %d (%s)", e.Message, e.Role)
		if e.CallID != "" {
			what = fmt.Sprintf("message %d (the result of call %s)", e.Message, e.CallID)
		}
		fmt.Fprintf(g.stderr, "%s %s: %q → %q\n", st.dim("edited"), what, oneLine(e.From, 60), oneLine(e.To, 60))
	}
	if r.OpenTurn > 0 {
		fmt.Fprintf(g.stderr, "%s\n", st.dim(fmt.Sprintf("the fork ends inside turn %d, after step %s: `tahctl resume %s` runs it on", r.OpenTurn, r.AtStep, r.Session)))
	}
}

// forkEditFile is the JSON of --edit FILE: wire.ForkEdit, with "step" a
// step's # in the timeline (a number) or its id (a string).
type forkEditFile struct {
	ToolResult string          `json:"tool_result"`
	Step       json.RawMessage `json:"step"`
	Turn       int             `json:"turn"`
	Message    *int            `json:"message"`
	Content    *string         `json:"content"`
	IsError    *bool           `json:"is_error"`
}

// names counts the messages e names.
func (e forkEditFile) names() int {
	n := 0
	for _, set := range []bool{e.ToolResult != "", len(e.Step) > 0, e.Turn != 0, e.Message != nil} {
		if set {
			n++
		}
	}
	return n
}

// readForkEdit reads and checks --edit FILE (- for stdin).
func readForkEdit(g *globals, file string) (*forkEditFile, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(g.stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, usageError("--edit names a JSON file, or - for stdin", "%v", err)
	}
	var e forkEditFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return nil, usageError(`e.g. {"step": 4, "content": "what the tool returns instead"} (tahctl fork --help)`, "--edit %s: %v", file, err)
	}
	switch {
	case e.Content == nil:
		return nil, usageError(`e.g. {"step": 4, "content": "what the tool returns instead"}`, "--edit %s has no \"content\": what replaces the message", file)
	case e.names() > 1:
		return nil, usageError(`one of "step", "tool_result", "turn" or "message"`, "--edit %s names more than one message", file)
	}
	return &e, nil
}

// request is the edit of the fork of session id at step at ("" for
// none): the step named by its # becomes its id, and an edit that names
// no message is of the --at step.
func (e forkEditFile) request(ctx context.Context, c *conn, id, at string) (*wire.ForkEdit, error) {
	r := &wire.ForkEdit{ToolResult: e.ToolResult, Turn: e.Turn, Message: e.Message, Content: *e.Content, IsError: e.IsError}
	switch {
	case len(e.Step) > 0:
		var n int
		var s string
		switch {
		case json.Unmarshal(e.Step, &n) == nil:
			s = strconv.Itoa(n)
		case json.Unmarshal(e.Step, &s) == nil:
		default:
			return nil, usageError(`"step": 4 (its # in tahctl show) or "step": "tool-…" (its id)`, "the edit's step %s is neither a number nor an id", e.Step)
		}
		id, err := c.anyStepID(ctx, id, s)
		if err != nil {
			return nil, err
		}
		r.Step = id
	case e.names() == 0:
		r.Step = at
	}
	return r, nil
}
