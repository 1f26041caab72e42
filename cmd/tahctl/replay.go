package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/event"
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
replaces every tool offered. --max-steps replaces the most LLM calls of a turn (0:
unlimited; a turn's own, given with send --max-steps, still applies).

--live goes on from the divergence with the real model and tools: a new session,
labelled replay-of=ID (tahctl list marks it), holds the recorded history up to the
step before the diverging one and runs the turn on from there under the replay's
definition (whichever node runs it); a divergence at a turn's first step runs that
turn's message again. replay follows the live turn to its end, as send does, and
prints its answer. Its exit status is the live turn's when it failed or was cancelled,
else 7; identical: nothing runs, 0. With --json the report's line comes first, then
the live turn's lines as send --json prints them. It spends tokens and runs tools:
--tools-file is refused with it.

--all replays every session (of those updated since --since T, an RFC 3339 time, a
date or a duration back from now such as 24h or 7d; with every --label K=V), but
replays' live sessions, --concurrency N at a time, with a line per session on
stderr as each ends and a table on stdout: identical, diverged at turn t step k,
or an error. Sub-agents' sessions are left out when a flag changes the definition
(their definition is their sub-agent's). Exit status 7 when any diverged, else 1
when any failed, else 0.`

// runReplay is `tahctl replay ID [--turn N] [--from STEP] [--system-prompt-file F]
// [--model M] [--tools-file F] [--live]`, or `tahctl replay --all`.
func runReplay(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("replay", "ID [--turn N] [--from STEP] [--system-prompt-file F] [--model M] [--tools-file F] [--max-steps N] [--live] | --all [--since T] [--label K=V]... [--concurrency N]", replayHelp)
	turn := fs.Int("turn", 0, "replay only turn `N`")
	from := fs.String("from", "", "compare from step `STEP` on: its id, or its # in tahctl show")
	promptFile := fs.String("system-prompt-file", "", "replace the system prompt with the content of `FILE`")
	model := fs.String("model", "", "replace the model with `M`")
	toolsFile := fs.String("tools-file", "", "replace the tools offered with those of `FILE` (JSON)")
	maxSteps := fs.Int("max-steps", 0, "replace the most LLM calls of a turn with `N` (0: unlimited)")
	live := fs.Bool("live", false, "at a divergence, run the diverging turn again in a new session with the real model and tools, and follow it")
	all := fs.Bool("all", false, "replay every session (but replays), and print a table")
	since := fs.String("since", "", "with --all: only sessions updated since `T` (RFC 3339, 2006-01-02, or a duration back: 24h, 7d)")
	ls := labels{}
	fs.Var(ls, "label", "with --all: only sessions with the label `K=V` (repeatable)")
	concurrency := fs.Int("concurrency", 4, "with --all: replay `N` sessions at a time (1 to 64)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *turn < 0 {
		return usageError("--turn N names a turn, from 1; leave it out to replay every turn", "--turn %d is negative", *turn)
	}
	req := wire.ReplayRequest{Turn: *turn, Model: *model}
	if err := definitionFlags(&req, *promptFile, *toolsFile); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["max-steps"] {
		if *maxSteps < 0 {
			return usageError("--max-steps 5 (0: unlimited)", "--max-steps %d is negative", *maxSteps)
		}
		req.MaxSteps = maxSteps
	}
	if *all {
		o, err := allOptionsOf(pos, set, *since, ls, *concurrency)
		if err != nil {
			return err
		}
		return replayAll(ctx, g, req, o)
	}
	for _, name := range []string{"since", "label", "concurrency"} {
		if set[name] {
			return usageError("tahctl replay --all --"+name+" ...", "--%s goes with --all", name)
		}
	}
	id, err := oneID(fs, pos)
	if err != nil {
		return err
	}
	req.Session = id
	if *live && req.Tools != nil {
		return usageError("replay --live without --tools-file (a live run calls the node's tools as they are), or --tools-file without --live",
			"--live runs the node's tools: they cannot be offered with the schemas of --tools-file")
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if req.FromStep, err = c.anyStepID(ctx, id, *from); err != nil {
		return err
	}
	if *live {
		return c.replayLive(ctx, req)
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

// definitionFlags sets req's changes to the definition from the files of
// --system-prompt-file and --tools-file.
func definitionFlags(req *wire.ReplayRequest, promptFile, toolsFile string) error {
	if promptFile != "" {
		b, err := os.ReadFile(promptFile)
		if err != nil {
			return usageError("give a file that holds the system prompt", "--system-prompt-file: %v", err)
		}
		p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		req.SystemPrompt = &p
	}
	if toolsFile != "" {
		ts, err := readTools(toolsFile)
		if err != nil {
			return err
		}
		req.Tools = &ts
	}
	return nil
}

// replayLive is replay --live: the report, then, at a divergence, the live
// session's turn followed to its end (as send follows its own).
func (c *conn) replayLive(ctx context.Context, req wire.ReplayLiveRequest) error {
	g := c.g
	r, err := c.ReplayLive(ctx, req)
	if err != nil {
		return c.failed(wire.EndpointReplayLive, err)
	}
	if g.json {
		err = printJSON(g.stdout, r)
	} else {
		err = printReplay(g, r)
	}
	if err != nil || r.Live == nil {
		return err // identical: nothing to run live
	}
	l := r.Live
	w := c.watch(l.Session)
	defer w.Close()
	held := "no recorded turn"
	if l.Turns > 0 {
		held = "recorded turns 1 to " + strconv.Itoa(l.Turns)
		if l.Turns == 1 {
			held = "recorded turn 1"
		}
	}
	cmd, in := wire.CommandRun, wire.Input{Message: &l.Message}
	how := fmt.Sprintf("runs turn %d again", l.Turn)
	if l.AfterStep != "" {
		cmd, in = wire.CommandResume, wire.Input{}
		how = fmt.Sprintf("and turn %d up to step %s, runs it on", l.Turn, l.AfterStep)
	}
	w.note(w.st.dim("live: session ") + w.st.cyan(l.Session) + w.st.dim(fmt.Sprintf(" (replay-of=%s), with %s, %s under the replay's definition:", r.Session, held, how)))
	w.note(w.st.dim("  > ") + oneLine(l.Message.Content, 100))
	if err := w.start(ctx, cmd, in); err != nil {
		return err
	}
	if err := w.wait(ctx); err != nil {
		return err
	}
	w.note(w.st.dim("recorded: tahctl show " + r.Session + " · live: tahctl show " + l.Session))
	return exitStatus(exitDiverged)
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
	if c := r.DefinitionChanged; c != nil && len(c.Changes) > 0 {
		// What differs from the agent the recorded turn says it ran under,
		// before any step is compared: why a divergence may come.
		fmt.Fprintf(g.stderr, "%s %s\n", st.bold(fmt.Sprintf("Changed since turn %d:", c.Turn)), event.DescribeChanges(c.Changes))
	}
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
