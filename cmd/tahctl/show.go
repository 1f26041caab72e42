package main

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

const showHelp = `Shows a session and its steps as a timeline: for each step its turn, kind
(llm, tool, thinking; "llm compaction" for the call that summarised earlier
turns), status, duration, tokens and cost; for a tool its input and a preview
of its output; for a model call what it answered, and what trimming cut from
its request. Then the cost of each turn and of the session, and the last
answer. A session with a budget (limits on tokens, cost or time, per turn
or for the session) has a Budget line: each limit in force, what its scope
spent of it and where it was set (node, session or input), "reached" on
the one the last turn stopped at; --json has it as the session's "budget".

Costs are in US dollars, as the node that made each model call recorded it
from its price table (docs/operations.md, Cost): "no price" for a model the
table does not price, never a guessed cost. --json has them as numbers: the
session's "cost", each step's "cost" and each of "turns".

Each turn records a digest of the definition of its agent (system prompt,
tools, model, settings, loop, the node's version): when it changed between
turns, "Definition changed" says which parts at which turn; --json has the
session's "definitions" and each of "turns" its "definition" digest. A fork
says where it comes from: the step it was made at, and its edit.

With --request STEP, prints instead the request a model call sent, as JSON:
rebuilt from the session's log and checked against the hash recorded when it
was sent. STEP is the # of the step in the timeline, or its id.`

// runShow is `tahctl show ID`.
func runShow(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("show", "ID", showHelp)
	full := fs.Bool("full", false, "print the whole last answer (default: its first 10 lines)")
	step := fs.String("request", "", "print the request that model call `STEP` sent (its # in the timeline, or its id)")
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	if *step != "" {
		return showRequest(ctx, g, c, id, *step)
	}
	s, err := c.getSession(ctx, id)
	if err != nil {
		return err
	}
	// Brief: tool outputs cut to a preview, so that the reply fits in a message.
	r, err := c.Steps(ctx, wire.StepsRequest{Session: id, Brief: true})
	if err != nil {
		return c.failed(wire.EndpointSteps, err)
	}
	turns := turnCosts(r.Steps)
	for i := range turns {
		turns[i].Definition = definitionAt(s.Definitions, turns[i].Turn)
	}
	// The schedules that will wake it (a node of an older version has no
	// such endpoint: none shown).
	scheds, _ := c.Schedules(ctx, id)
	if g.json {
		return printJSON(g.stdout, map[string]any{"session": s, "steps": r.Steps, "turns": turns, "schedules": scheds})
	}
	st := newStyle(g, g.stdout)
	w := g.stdout
	fmt.Fprintf(w, "%s  %s  %s\n", st.bold(s.ID), statusCell(st, string(s.Status)).paintText(), st.dim(fmt.Sprintf("%s · created %s · updated %s", plural(s.Turn, "turn"), ago(s.CreatedAt), ago(s.UpdatedAt))))
	if s.Title != "" {
		fmt.Fprintf(w, "  %q\n", oneLine(s.Title, 100))
	}
	if s.ForkedFrom != "" {
		showFork(ctx, w, st, c, s)
	}
	if p := s.Parent; p != nil {
		fmt.Fprintf(w, "  %s\n", st.dim(fmt.Sprintf("sub-agent %s of %s (its call %s; depth %d): tahctl show %s", p.Agent, p.Session, p.CallID, p.Depth, p.Session)))
	}
	if s.Fault != nil {
		showFault(w, st, s.ID, s.Fault)
	}
	if s.AwaitingApproval {
		fmt.Fprintf(w, "  %s\n", st.bold("waits for approval of tool calls: tahctl approve "+s.ID+" [CALL], or tahctl deny "+s.ID+" [CALL] --note TEXT"))
	}
	var llmCalls, toolCalls int
	for _, step := range r.Steps {
		switch step.Type {
		case projection.StepLLM:
			llmCalls++
		case projection.StepTool:
			toolCalls++
		}
	}
	fmt.Fprintf(w, "  %s\n\n", st.dim(fmt.Sprintf("%s · %s · %s tokens in, %s out · %s · %s events",
		plural(llmCalls, "model call"), plural(toolCalls, "tool call"), num(s.Usage.InputTokens), num(s.Usage.OutputTokens),
		s.Cost, num(s.Events))))
	if line := budgetLine(st, s.Budget, time.Now()); line != "" {
		fmt.Fprintf(w, "%s %s\n\n", st.bold("Budget:"), line)
	}
	showChildren(w, st, s)
	showDefinitions(w, st, s.Definitions)
	if len(scheds) > 0 {
		var parts []string
		for _, sc := range scheds {
			parts = append(parts, sc.Name+" "+describeSpec(sc))
		}
		fmt.Fprintf(w, "%s %s %s\n\n", st.bold("Schedules:"), strings.Join(parts, "; "), st.dim("(tahctl schedule ls "+s.ID+")"))
	}
	if len(r.Steps) == 0 {
		if s.Status.Active() {
			fmt.Fprintf(w, "No steps yet: turn %d, copied open, waits: `tahctl resume %s` runs it on.\n", s.Turn, s.ID)
			return nil
		}
		fmt.Fprintf(w, "No steps yet: `tahctl send -s %s \"your question\"` starts a turn.\n", s.ID)
		return nil
	}
	var t table
	t.add(cell{"TURN", st.bold}, cell{"#", st.bold}, cell{"KIND", st.bold}, cell{"STATUS", st.bold}, cell{"TIME", st.bold},
		cell{"TOKENS", st.bold}, cell{"COST", st.bold}, cell{"DETAIL", st.bold})
	for i, step := range r.Steps {
		tokens, detail := stepDetail(st, step)
		t.add(plain(fmt.Sprint(step.Turn)), plain(fmt.Sprint(i+1)), plain(stepKind(step)), statusCell(st, string(step.Status)),
			plain(ms(step.DurationMS)), plain(tokens), plain(stepCost(step)), plain(detail))
	}
	if err := t.write(w); err != nil {
		return err
	}
	if len(turns) > 0 {
		fmt.Fprintf(w, "\n%s %s for the session%s\n", st.bold("Cost:"), s.Cost, turnsNote(turns))
	}
	switch {
	case s.LastOutput != "":
		out := s.LastOutput
		if !*full {
			out = cutLines(out, 10, "tahctl show --full "+s.ID)
		}
		fmt.Fprintf(w, "\n%s\n%s\n", st.bold("Last answer:"), out)
	case s.LastCode == "cancelled":
		fmt.Fprintf(w, "\n%s %s\n", st.yellow("Cancelled:"), s.LastError)
	case s.LastError != "":
		fmt.Fprintf(w, "\n%s %s [%s]\n", st.red("Last error:"), s.LastError, s.LastCode)
	}
	return nil
}

// showChildren lists the sessions of s's sub-agents, and what its whole
// tree used and cost.
func showChildren(w io.Writer, st style, s wire.SessionSummary) {
	if len(s.Children) == 0 {
		return
	}
	fmt.Fprintf(w, "%s\n", st.bold("Sub-agents:"))
	for _, c := range s.Children {
		fmt.Fprintf(w, "  %s  %s  %s\n", c.ID, statusCell(st, string(c.Status)).paintText(), st.dim(c.Agent+", call "+c.CallID))
	}
	if t := s.Tree; t != nil {
		fmt.Fprintf(w, "  %s\n", st.dim(fmt.Sprintf("with its sub-agents (%s): %s tokens in, %s out · %s",
			plural(t.Sessions, "session"), num(t.Usage.InputTokens), num(t.Usage.OutputTokens), t.Cost)))
	}
	fmt.Fprintln(w)
}

func (c cell) paintText() string {
	if c.paint == nil {
		return c.text
	}
	return c.paint(c.text)
}

// cutLines keeps the first n lines of s and says how many more there are and
// which command shows them.
func cutLines(s string, n int, more string) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… %d more lines: %s", len(lines)-n, more)
}

// stepDetail is a step's tokens and what it did, on one line each.
func stepDetail(st style, step projection.Step) (tokens, detail string) {
	switch {
	case step.Compaction:
		if step.Response != nil {
			u := step.Response.Usage
			tokens = num(u.InputTokens) + " → " + num(u.OutputTokens)
		}
		detail = "summary of earlier turns"
	case step.Type == projection.StepLLM:
		if step.Response != nil {
			u := step.Response.Usage
			tokens = num(u.InputTokens) + " → " + num(u.OutputTokens)
			var names []string
			for _, tc := range step.Response.ToolCalls {
				names = append(names, tc.Name)
			}
			switch {
			case len(names) > 0 && step.Response.Content != "":
				detail = fmt.Sprintf("%q, then calls %s", oneLine(step.Response.Content, 30), strings.Join(names, ", "))
			case len(names) > 0:
				detail = "calls " + strings.Join(names, ", ")
			default:
				detail = fmt.Sprintf("%q", oneLine(step.Response.Content, 60))
			}
		}
	case step.Type == projection.StepTool:
		detail = step.Tool + " " + compactJSON(step.Input, 50)
		if step.Child != "" {
			detail += " [sub-agent session " + step.Child + "]"
		}
		if step.Status.Done() {
			if outputCut(step) {
				detail += " → " + cutPreview(step.Output, 50)
			} else {
				detail += " → " + preview(step.Output, 50)
			}
		}
		if step.Artifact != nil {
			detail += fmt.Sprintf(" [full output: %s, %s bytes]", step.Artifact.Object, num(int(step.Artifact.Size)))
		}
	case step.Type == projection.StepThinking:
		detail = oneLine(step.Content, 80)
	}
	if step.Trim != nil && step.Trim.Trimmed() {
		detail = strings.TrimSpace(st.yellow(trimNote(*step.Trim)) + " " + detail)
	}
	if step.Error != "" {
		detail = strings.TrimSpace(detail + " " + st.red("error: "+oneLine(step.Error, 80)))
		if step.Code != "" {
			detail += " [" + step.Code + "]"
		}
	}
	return tokens, detail
}

// stepKind is a step's KIND: its type, and "llm compaction" for the model
// call that summarised earlier turns.
func stepKind(step projection.Step) string {
	if step.Compaction {
		return string(step.Type) + " compaction"
	}
	return string(step.Type)
}

// trimNote says what trimming cut from the request of a model call.
func trimNote(r event.TrimReport) string {
	var cut []string
	if r.TurnsDropped > 0 {
		cut = append(cut, plural(r.TurnsDropped, "turn")+" dropped")
	}
	if n := r.OutputsOmitted + r.CurrentOutputsOmitted; n > 0 {
		cut = append(cut, plural(n, "tool output")+" omitted")
	}
	return fmt.Sprintf("[trimmed: %s, %s → %s chars]", strings.Join(cut, ", "), num(r.BeforeChars), num(r.AfterChars))
}

// showFault says where a session's log stopped being foldable, and what to do.
func showFault(w io.Writer, st style, sid string, f *projection.Fault) {
	if f.Code == projection.FaultNeedsNewerNode {
		fmt.Fprintf(w, "  %s the log at seq %d is of a newer TAH: %s\n", st.yellow("Needs a newer node:"), f.Seq, f.Reason)
		fmt.Fprintf(w, "  %s\n", st.dim("Its inputs wait for an upgraded node; upgrade this one (see docs/operations.md)."))
		return
	}
	fmt.Fprintf(w, "  %s log corrupt at seq %d: %s [%s]\n", st.red("Failed:"), f.Seq, f.Reason, f.Code)
	fmt.Fprintf(w, "  %s\n", st.dim("It takes no input. `tahctl fork "+sid+" [--turns N]` starts a new session from the turns before it."))
}

// outputCut reports whether the output a step shows is the start of a whole
// kept as its artifact (tools.ArtifactName(call, "output.txt")), cut again
// for a brief reply: its line count would be the kept start's, not the
// whole's (74 lines, for a 510-line file).
func outputCut(step projection.Step) bool {
	if step.Artifact == nil || path.Base(step.Artifact.Object) != "output.txt" {
		return false
	}
	out := strings.TrimRight(step.Output, "\n")
	return briefMarker.MatchString(out[strings.LastIndex(out, "\n")+1:])
}

// turnCost is what one turn's model calls used and cost, as show --json
// lists them, and the digest of the definition of the agent it ran under
// (when its turn.started recorded one).
type turnCost struct {
	Turn       int          `json:"turn"`
	Usage      llm.Usage    `json:"usage"`
	Cost       pricing.Cost `json:"cost"`
	Definition string       `json:"definition,omitempty"`
}

// definitionAt is the digest of the definition turn ran under, "" when
// none was recorded.
func definitionAt(defs []projection.TurnDefinition, turn int) string {
	for i := len(defs) - 1; i >= 0; i-- {
		if defs[i].Turn <= turn {
			return defs[i].Digest
		}
	}
	return ""
}

// showDefinitions says, when the definition of the agent changed between
// the session's turns, which parts changed at which turn.
func showDefinitions(w io.Writer, st style, defs []projection.TurnDefinition) {
	if len(defs) < 2 {
		return
	}
	fmt.Fprintf(w, "%s\n", st.bold("Definition changed:"))
	for i := 1; i < len(defs); i++ {
		fmt.Fprintf(w, "  turn %d: %s\n", defs[i].Turn, event.DescribeChanges(defs[i-1].Changes(defs[i].AgentDefinition)))
	}
	fmt.Fprintln(w)
}

// showFork says where a fork's copy comes from: the source, the step it
// ends after, the edit it made (its log's first record says).
func showFork(ctx context.Context, w io.Writer, st style, c *conn, s wire.SessionSummary) {
	line := "forked from " + s.ForkedFrom
	var edits []string
	if r, err := c.Events(ctx, wire.EventsRequest{Session: s.ID, Limit: 1}); err == nil {
		for _, ev := range r.Events {
			switch ev.Type {
			case event.TurnForked:
				if d, err := event.DecodeAs[event.TurnForkedData](ev); err == nil && d.AtStep != "" {
					line += fmt.Sprintf(" inside its turn %d, after step %s", d.Turn, d.AtStep)
				}
			case event.SessionEdited:
				if d, err := event.DecodeAs[event.SessionEditedData](ev); err == nil {
					edits = append(edits, editLine(d))
				}
			}
		}
	}
	fmt.Fprintf(w, "  %s\n", st.dim(line))
	for _, e := range edits {
		fmt.Fprintf(w, "  %s\n", st.yellow(e))
	}
}

// editLine says what an edit of a fork's copy changed, and who made it.
func editLine(d event.SessionEditedData) string {
	what := fmt.Sprintf("message %d (%s)", d.Message, d.Role)
	if d.CallID != "" {
		what = fmt.Sprintf("message %d (the result of call %s)", d.Message, d.CallID)
	}
	s := fmt.Sprintf("edited %s: %q → %q", what, oneLine(d.From, 40), oneLine(d.To, 40))
	if d.By != "" {
		s += " by " + d.By
	}
	return s
}

// turnCosts sums the model calls' usage and recorded cost by turn, in turn
// order: a compaction's call counts in the turn it ran in (a compact
// command's, in the turn before it).
func turnCosts(steps []projection.Step) []turnCost {
	var out []turnCost
	for _, s := range steps {
		if s.Type != projection.StepLLM {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Turn != s.Turn {
			out = append(out, turnCost{Turn: s.Turn})
		}
		t := &out[len(out)-1]
		if s.Response != nil {
			t.Usage = t.Usage.Add(s.Response.Usage)
		}
		if s.Cost != nil {
			t.Cost = t.Cost.Add(*s.Cost)
		}
	}
	return out
}

// shownTurns is how many turns' costs the text of show lists at most: the
// last ones.
const shownTurns = 10

// turnsNote lists the cost of each turn, the last shownTurns, after the
// session's: nothing for a session of one turn, whose cost is the session's.
func turnsNote(turns []turnCost) string {
	if len(turns) < 2 {
		return ""
	}
	var parts []string
	if n := len(turns) - shownTurns; n > 0 {
		parts = append(parts, fmt.Sprintf("%s before", plural(n, "turn")))
		turns = turns[n:]
	}
	for _, t := range turns {
		parts = append(parts, fmt.Sprintf("turn %d %s", t.Turn, t.Cost))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// stepCost is the COST of a step: a model call's recorded cost, "?" for one
// that used tokens and recorded none (logged before costs were), nothing
// for the other steps.
func stepCost(step projection.Step) string {
	switch {
	case step.Cost != nil:
		return step.Cost.String()
	case step.Type == projection.StepLLM && step.Response != nil && step.Response.Usage != (llm.Usage{}):
		return "?"
	}
	return ""
}

// budgetLine says each limit in force of b with what its scope spent at now
// and where it was set, "reached" on the one the last turn stopped at, e.g.
// "turn tokens 300 of 250 (input) reached · session cost $0.42 of $1.00
// (session)"; and the limit the last turn reached when it is no longer in
// force as it was (raised or removed since). Empty without a budget.
func budgetLine(st style, b *wire.SessionBudget, now time.Time) string {
	if b == nil {
		return ""
	}
	var parts []string
	marked := false
	for _, l := range b.Limits {
		part := fmt.Sprintf("%s %s %s of %s (%s)", l.Scope, event.KindWord(l.Kind), budgetFigure(l.Kind, b.SpentAt(l, now)),
			budgetFigure(l.Kind, l.Limit), l.From)
		if b.IsReached(l) {
			part += " " + st.red("reached")
			marked = true
		}
		parts = append(parts, part)
	}
	if b.Reached != nil && !marked {
		parts = append(parts, st.yellow("the last turn stopped: "+b.Reached.String()))
	}
	return strings.Join(parts, " · ")
}

// budgetFigure writes a limit or a spend of a kind of limit: tokens, US
// dollars or milliseconds.
func budgetFigure(kind string, v float64) string {
	switch kind {
	case event.LimitTokens:
		return num(int(v))
	case event.LimitCostUSD:
		return pricing.FormatUSD(v)
	case event.LimitTimeMS:
		if v < 1 {
			return "0s"
		}
		return ms(int64(v))
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
