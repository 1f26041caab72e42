package main

import (
	"context"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// runList is `tahctl list`.
func runList(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("list", "[--status S] [--tenant NAME] [--limit N]", "Lists the sessions, the most recently updated first. With a tenant's credential, the tenant's only.")
	status := fs.String("status", "", "only sessions in this `state`: idle, running, waiting_tool, completed, failed, cancelled, needs_newer_node")
	tenant := fs.String("tenant", "", "only tenant `NAME`'s sessions (ids NAME.s_…)")
	limit := fs.Int("limit", 50, "at most `N` sessions (1 to 1000)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("`tahctl show ID` shows one session", "list takes no arguments, got %q", pos[0])
	}
	switch *status {
	case "", "idle", "running", "waiting_tool", "completed", "failed", "cancelled":
	default:
		return usageError("use idle, running, waiting_tool, completed, failed or cancelled", "unknown --status %q", *status)
	}
	if err := checkTenant(*tenant, ""); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageError("--limit 50", "--limit %d is not within 1 to 1000", *limit)
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	req := wire.ListRequest{Status: projection.Status(*status), Tenant: *tenant, Limit: *limit}
	r, err := c.List(ctx, req)
	// A node cuts a page to what one reply holds: the rest, up to --limit,
	// is on the next pages.
	for err == nil && r.Next != "" && len(r.Sessions) < *limit {
		req.Before, req.Limit = r.Next, *limit-len(r.Sessions)
		var more wire.ListReply
		if more, err = c.List(ctx, req); err == nil {
			if len(more.Sessions) == 0 {
				break // a page is never empty but the last: do not ask forever
			}
			r.Sessions, r.Next = append(r.Sessions, more.Sessions...), more.Next
		}
	}
	if err != nil {
		return c.failed(wire.EndpointList, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	if len(r.Sessions) == 0 {
		fmt.Fprintln(g.stderr, "no sessions yet: `tahctl send \"your question\"` starts one")
		return nil
	}
	st := newStyle(g, g.stdout)
	var t table
	t.add(cell{"SESSION", st.bold}, cell{"STATUS", st.bold}, cell{"TURNS", st.bold}, cell{"COST", st.bold}, cell{"UPDATED", st.bold}, cell{"TITLE", st.bold})
	for _, s := range r.Sessions {
		title := oneLine(s.Title, 60)
		if of, ok := s.Labels[wire.LabelReplayOf]; ok {
			title = "(replay of " + of + ") " + title // a fork too: it says what matters
		} else if s.ForkedFrom != "" {
			title = "(fork of " + s.ForkedFrom + ") " + title
		}
		if p := s.Parent; p != nil {
			title = "(" + p.Agent + " for " + p.Session + ") " + title
		}
		status := statusCell(st, string(s.Status))
		if s.Status == projection.StatusFailed && s.LastCode == event.CodeBudgetExceeded {
			status.text += " (budget)" // its last turn stopped at a limit: tahctl show says which
		}
		t.add(plain(s.ID), status, plain(fmt.Sprint(s.Turn)), plain(sessionCost(s)), plain(ago(s.UpdatedAt)), plain(title))
	}
	if err := t.write(g.stdout); err != nil {
		return err
	}
	if r.Next != "" {
		fmt.Fprintf(g.stderr, "(more sessions: raise --limit)\n")
	}
	return nil
}

// sessionCost is a session's COST: what its model calls cost ("no price"
// for those of a model without one), or nothing before any call used a token.
func sessionCost(s wire.SessionSummary) string {
	if s.Cost.IsZero() && s.Usage == (llm.Usage{}) {
		return ""
	}
	return s.Cost.String()
}

// statusCell colours a session's or a step's status.
func statusCell(st style, s string) cell {
	switch s {
	case "completed":
		return cell{s, st.green}
	case "failed":
		return cell{s, st.red}
	case "cancelled", "needs_newer_node":
		return cell{s, st.yellow}
	case "running", "waiting_tool", "pending", "streaming":
		return cell{s, st.cyan}
	}
	return plain(s)
}
