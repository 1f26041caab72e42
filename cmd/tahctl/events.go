package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/wire"
)

const eventsHelp = `Prints a session's events, the log itself, one per line: stream sequence
(of the event's record in the session's shard of the log, with the event's
index in the record after a dot when it is not the first), time, type and a
summary. --follow keeps waiting for new events until Ctrl-C
(which then exits 0). With --json, each event is one JSON object per line.`

// runEvents is `tahctl events ID [--follow] [--from SEQ]`.
func runEvents(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("events", "ID [--follow] [--from SEQ]", eventsHelp)
	follow := fs.Bool("follow", false, "after the log so far, wait for new events (Ctrl-C ends)")
	fs.BoolVar(follow, "f", false, "same as --follow")
	from := fs.Uint64("from", 0, "start at stream sequence `SEQ` (default: the session's first event)")
	id, c, err := g.sessionCommand(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	p := eventPrinter{w: g.stdout, json: g.json, st: newStyle(g, g.stdout)}
	// The log so far, a page at a time.
	next := max(*from, 1) // the first sequence not printed
	for ev, err := range c.Log(ctx, id, *from) {
		if errors.Is(err, client.ErrNotFound) {
			return notFound(id)
		}
		if err != nil {
			return c.failed(wire.EndpointEvents, err)
		}
		if err := p.print(ev); err != nil {
			return err
		}
		next = max(next, ev.Seq+1)
	}
	if !*follow {
		return nil
	}
	f, err := c.Follow(ctx, id, next)
	if err != nil {
		return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "follow the events of %s: %v", id, err)
	}
	defer f.Close()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if !g.json {
		fmt.Fprintln(g.stderr, p.st.dim("… waiting for new events (Ctrl-C to stop)"))
	}
	for {
		select {
		case ev, ok := <-f.Events():
			if !ok {
				return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "the connection to the node closed")
			}
			if err := p.print(ev); err != nil {
				return err
			}
		case s := <-c.states:
			if !g.json {
				fmt.Fprintln(g.stderr, p.st.yellow("! "+string(s)))
			}
		case <-sigs:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// eventPrinter prints events for people, or as JSON lines.
type eventPrinter struct {
	w    io.Writer
	json bool
	st   style
}

func (p eventPrinter) print(ev event.Event) error {
	if p.json {
		return printJSON(p.w, ev)
	}
	typ := fmt.Sprintf("%-24s", ev.Type)
	switch {
	case strings.HasSuffix(string(ev.Type), "failed"):
		typ = p.st.red(typ)
	case ev.Type == event.AgentFinished:
		typ = p.st.green(typ)
	case ev.Type == event.AgentCancelled:
		typ = p.st.yellow(typ)
	case strings.HasPrefix(string(ev.Type), "tool."):
		typ = p.st.cyan(typ)
	}
	_, err := fmt.Fprintf(p.w, "%6s  %s  %s %s\n", position(ev), p.st.dim(ev.Time.Local().Format("15:04:05.000")), typ, summary(ev))
	return err
}

// position is an event's place in the log: its record's sequence, and its
// index in the record after a dot when it is not the record's first.
func position(ev event.Event) string {
	if ev.Index == 0 {
		return strconv.FormatUint(ev.Seq, 10)
	}
	return fmt.Sprintf("%d.%d", ev.Seq, ev.Index)
}

// summary says what an event is about, on one line.
func summary(ev event.Event) string {
	switch ev.Type {
	case event.SessionCreated:
		d, _ := event.DecodeAs[event.SessionCreatedData](ev)
		s := fmt.Sprintf("max_steps %d", d.Config.MaxSteps)
		if d.ForkedFrom != "" {
			s += ", forked from " + d.ForkedFrom
		}
		return s
	case event.SessionForked:
		d, _ := event.DecodeAs[event.SessionForkedData](ev)
		return fmt.Sprintf("from %s (turns %d, %d messages)", d.From, d.Turns, len(d.Messages))
	case event.TurnForked:
		d, _ := event.DecodeAs[event.TurnForkedData](ev)
		return fmt.Sprintf("turn %d open, after step %s (%s)", d.Turn, d.AtStep, plural(len(d.Messages), "message"))
	case event.SessionEdited:
		d, _ := event.DecodeAs[event.SessionEditedData](ev)
		return editLine(d)
	case event.SessionClaimed:
		d, _ := event.DecodeAs[event.SessionClaimedData](ev)
		return fmt.Sprintf("by node %s, epoch %d", d.Node, d.Epoch)
	case event.TurnStarted:
		d, _ := event.DecodeAs[event.TurnStartedData](ev)
		return fmt.Sprintf("turn %d%s: %q", d.Turn, byWhom(d.By), oneLine(d.Message.Content, 60))
	case event.TurnSteered:
		d, _ := event.DecodeAs[event.TurnSteeredData](ev)
		return fmt.Sprintf("turn %d steered: %q", d.Turn, oneLine(d.Message.Content, 60))
	case event.LLMStarted:
		d, _ := event.DecodeAs[event.LLMStartedData](ev)
		if d.Recorded() {
			return fmt.Sprintf("%s, %s, %s", d.StepID, plural(len(d.Request.Messages), "message"), plural(len(d.Request.Tools), "tool"))
		}
		return fmt.Sprintf("%s, history of %s, %s", d.StepID, plural(d.History, "message"), plural(len(d.Tools), "tool"))
	case event.ToolsOffered:
		d, _ := event.DecodeAs[event.ToolsOfferedData](ev)
		var names []string
		for _, t := range d.Tools {
			names = append(names, t.Name)
		}
		return strings.Join(names, ", ")
	case event.LLMCompleted:
		d, _ := event.DecodeAs[event.LLMCompletedData](ev)
		var what string
		if len(d.Response.ToolCalls) > 0 {
			var names []string
			for _, c := range d.Response.ToolCalls {
				names = append(names, c.Name)
			}
			what = "calls " + strings.Join(names, ", ")
		} else {
			what = fmt.Sprintf("%q", oneLine(d.Response.Content, 50))
		}
		s := fmt.Sprintf("%s %s (%s → %s tokens", d.StepID, what, num(d.Response.Usage.InputTokens), num(d.Response.Usage.OutputTokens))
		if t := ms(d.DurationMS); t != "" {
			s += ", " + t
		}
		return s + costNote(d.Cost) + ")"
	case event.LLMStreaming:
		d, _ := event.DecodeAs[event.LLMStreamingData](ev)
		return d.StepID + " (first token)"
	case event.LLMFailed:
		d, _ := event.DecodeAs[event.LLMFailedData](ev)
		return fmt.Sprintf("%s %s [%s]", d.StepID, oneLine(d.Error, 80), d.Code)
	case event.ToolStarted:
		d, _ := event.DecodeAs[event.ToolStartedData](ev)
		return d.Call.Name + " " + compactJSON(d.Call.Arguments, 60)
	case event.ToolWaiting:
		d, _ := event.DecodeAs[event.ToolWaitingData](ev)
		return fmt.Sprintf("%s waits for its tool service (up to %v)", d.Name, time.Duration(d.WaitMS)*time.Millisecond)
	case event.ToolApprovalRequested:
		d, _ := event.DecodeAs[event.ToolApprovalRequestedData](ev)
		var calls []string
		for _, c := range d.Calls {
			calls = append(calls, c.ID+" "+c.Name+" "+compactJSON(c.Arguments, 40))
		}
		s := "waits for approval: " + strings.Join(calls, "; ")
		if !d.Deadline.IsZero() {
			s += " (denied at " + d.Deadline.Local().Format(time.DateTime) + ")"
		}
		return s
	case event.ToolApproved:
		d, _ := event.DecodeAs[event.ToolApprovedData](ev)
		s := d.CallID + " approved" + byWhom(d.By)
		if len(d.Arguments) > 0 {
			s += ", with arguments " + compactJSON(d.Arguments, 40)
		}
		return s
	case event.ToolDenied:
		d, _ := event.DecodeAs[event.ToolDeniedData](ev)
		if d.Expired {
			return d.CallID + " denied: its deadline passed"
		}
		return d.CallID + " denied" + byWhom(d.By) + ": " + oneLine(d.Note, 60)
	case event.ToolFinished:
		d, _ := event.DecodeAs[event.ToolFinishedData](ev)
		s := d.Name + " → " + preview(d.Output, 50)
		if d.IsError {
			s += " [" + d.Code + "]"
		}
		if t := ms(d.DurationMS); t != "" {
			s += " (" + t + ")"
		}
		return s
	case event.AgentFinished:
		d, _ := event.DecodeAs[event.AgentFinishedData](ev)
		s := fmt.Sprintf("turn %d, %s, %s → %s tokens", d.Turn, plural(d.Steps, "model call"), num(d.Usage.InputTokens), num(d.Usage.OutputTokens))
		return s + costNote(d.Cost)
	case event.AgentFailed:
		d, _ := event.DecodeAs[event.AgentFailedData](ev)
		return fmt.Sprintf("turn %d: %s [%s]", d.Turn, oneLine(d.Error, 80), d.Code)
	case event.AgentCancelled:
		d, _ := event.DecodeAs[event.AgentCancelledData](ev)
		return fmt.Sprintf("turn %d%s: %s", d.Turn, byWhom(d.By), d.Reason)
	case event.ContextCompacted:
		d, _ := event.DecodeAs[event.ContextCompactedData](ev)
		return fmt.Sprintf("%s summarised, %s characters, %s → %s tokens%s", plural(d.Turns, "turn"), num(d.Chars),
			num(d.Usage.InputTokens), num(d.Usage.OutputTokens), costNote(d.Cost))
	case event.ContextCompactFailed:
		d, _ := event.DecodeAs[event.ContextCompactFailedData](ev)
		return fmt.Sprintf("%s [%s], %s → %s tokens%s", oneLine(d.Error, 80), d.Code, num(d.Usage.InputTokens), num(d.Usage.OutputTokens), costNote(d.Cost))
	case event.ArtifactCreated:
		d, _ := event.DecodeAs[event.ArtifactCreatedData](ev)
		return fmt.Sprintf("%s %s, %s bytes", d.ID, d.Name, num(int(d.Ref.Size)))
	case event.CheckpointCreated:
		d, _ := event.DecodeAs[event.CheckpointCreatedData](ev)
		return fmt.Sprintf("up to seq %d", d.UpToSeq)
	}
	return compactJSON(ev.Data, 80)
}

// costNote is ", " and a recorded cost, or nothing when none was recorded
// (no call made, or an event written before costs were recorded).
func costNote(c *pricing.Cost) string {
	if c == nil {
		return ""
	}
	return ", " + c.String()
}
