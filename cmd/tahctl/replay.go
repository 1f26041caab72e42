package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

const replayHelp = `Replays a session's recorded turns against today's node: its code and its agent
definition (system prompt, model, tools, context budget), or the definition the
flags change, without asking the model or running a tool: the model's answers and
the tool results come from the log, and nothing is written. At every recorded LLM
step the request the node would send now is compared with the one recorded (rebuilt
from the log and checked against its hash). Prints "identical over N turns, M LLM
steps", or the first divergence: where (turn, step) and what differs (which message
and its role, which tool schema, which setting) with both requests' hashes.
Exit status 0: identical; 7: diverged.

--system-prompt-file takes the file's content, less one final newline (an empty
file: no system prompt). --tools-file takes a JSON array of tools
({"name", "description", "input_schema"}), or what tahctl tools --json prints; it
replaces every tool offered.`

// runReplay is `tahctl replay ID [--turn N] [--from STEP] [--system-prompt-file F]
// [--model M] [--tools-file F]`.
func runReplay(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("replay", "ID [--turn N] [--from STEP] [--system-prompt-file F] [--model M]", replayHelp)
	turn := fs.Int("turn", 0, "replay only turn `N`")
	from := fs.String("from", "", "compare from step `STEP` on: its id, or its # in tahctl show")
	promptFile := fs.String("system-prompt-file", "", "replace the system prompt with the content of `FILE`")
	model := fs.String("model", "", "replace the model with `M`")
	toolsFile := fs.String("tools-file", "", "replace the tools offered with those of `FILE` (JSON)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	if *turn < 0 {
		return usageError("--turn N names a turn, from 1; leave it out to replay every turn", "--turn %d is negative", *turn)
	}
	req := wire.ReplayRequest{Session: id, Turn: *turn, Model: *model}
	if *promptFile != "" {
		b, err := os.ReadFile(*promptFile)
		if err != nil {
			return usageError("give a file that holds the system prompt", "--system-prompt-file: %v", err)
		}
		p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		req.SystemPrompt = &p
	}
	if *toolsFile != "" {
		ts, err := readTools(*toolsFile)
		if err != nil {
			return err
		}
		req.Tools = &ts
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if req.FromStep, err = c.anyStepID(ctx, id, *from); err != nil {
		return err
	}
	r, err := c.Replay(ctx, req)
	if err != nil {
		return c.failed(wire.EndpointReplay, err)
	}
	if g.json {
		err = printJSON(g.stdout, r)
	} else {
		err = printReplay(g, r)
	}
	if err == nil && !r.Identical {
		return exitStatus(exitDiverged)
	}
	return err
}

// readTools reads the tools of a --tools-file: an array of tools, or an
// object whose "tools" is one (tahctl tools --json).
func readTools(file string) ([]llm.ToolSchema, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError("give a JSON file of tools", "--tools-file: %v", err)
	}
	var ts []llm.ToolSchema
	if err := json.Unmarshal(b, &ts); err != nil {
		var reply wire.ToolsReply
		if err2 := json.Unmarshal(b, &reply); err2 != nil || reply.Tools == nil {
			return nil, usageError("`tahctl tools --json > tools.json` writes one to edit",
				"--tools-file %s: neither an array of tools nor {\"tools\": [...]}: %v", file, err)
		}
		ts = reply.Tools
	}
	if ts == nil {
		ts = []llm.ToolSchema{}
	}
	return ts, nil
}

// anyStepID is the id of the step that STEP names: its # in the timeline
// of `tahctl show` (a number), or its id; "" for none.
func (c *conn) anyStepID(ctx context.Context, id, step string) (string, error) {
	n, err := strconv.Atoi(step)
	if step == "" || err != nil {
		return step, nil
	}
	r, err := c.Steps(ctx, wire.StepsRequest{Session: id, Brief: true})
	if err != nil {
		return "", c.failed(wire.EndpointSteps, err)
	}
	if n < 1 || n > len(r.Steps) {
		return "", errorf(exitNotFound, "`tahctl show "+id+"` lists its steps (the # column)",
			"session %s has %s: there is no step #%d", id, plural(len(r.Steps), "step"), n)
	}
	return r.Steps[n-1].ID, nil
}

// printReplay writes the report for people: its verdict (or the
// divergence, with its diffs) on stdout, what it was compared with on
// stderr.
func printReplay(g *globals, r replay.Report) error {
	st := newStyle(g, g.stderr)
	d := r.Definition
	what := fmt.Sprintf("a system prompt of %s", plural(d.SystemPromptChars, "character"))
	if d.SystemPromptChars == 0 {
		what = "no system prompt"
	}
	if d.Model != "" {
		what = "model " + strconv.Quote(d.Model) + ", " + what
	}
	tools := "no tools"
	if len(d.Tools) > 0 {
		tools = "tools " + strings.Join(d.Tools, ", ")
	}
	fmt.Fprintln(g.stderr, st.dim(fmt.Sprintf("Replayed %s of %s against %s, %s; no model asked, no tool run", plural(r.Events, "event"), r.Session, what, tools)))
	if r.Divergence == nil {
		_, err := fmt.Fprintln(g.stdout, r.Summary())
		return err
	}
	if r.Steps > 0 {
		fmt.Fprintf(g.stdout, "identical for %s, then\n", plural(r.Steps, "LLM step"))
	}
	_, err := fmt.Fprint(g.stdout, r.Divergence.Text())
	return err
}
