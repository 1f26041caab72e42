package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

// tahctl replay --all: every session (of a time, of labels) replayed as one
// is, a few at a time, so that a change of prompt, model or code can be
// gated in CI on recorded sessions. It runs over tah.api.list and
// tah.api.replay: each replay reads one session's log on a node, and the
// node answers many side by side.

// allOptions are the flags of replay --all.
type allOptions struct {
	since       time.Time // zero: every session
	labels      map[string]string
	concurrency int
}

// allOptionsOf checks the flags of replay --all.
func allOptionsOf(pos []string, set map[string]bool, since string, ls labels, concurrency int) (allOptions, error) {
	if len(pos) > 0 {
		return allOptions{}, usageError("tahctl replay --all (every session) or tahctl replay ID (one)", "--all replays every session: no id, got %q", pos[0])
	}
	for _, name := range []string{"live", "turn", "from"} {
		if set[name] {
			return allOptions{}, usageError("tahctl replay ID --"+name+" ...", "--%s is for one session's replay, not --all", name)
		}
	}
	if concurrency < 1 || concurrency > 64 {
		return allOptions{}, usageError("--concurrency 4", "--concurrency %d is not within 1 to 64", concurrency)
	}
	o := allOptions{labels: ls, concurrency: concurrency}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return allOptions{}, usageError("--since 2026-11-30T10:00:00Z, --since 2026-11-30, --since 24h or --since 7d", "--since %q: %v", since, err)
		}
		o.since = t
	}
	return o, nil
}

// parseSince reads --since: an RFC 3339 time, a date (UTC midnight), or a
// duration back from now (a Go duration, or whole days: 7d).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("neither a time, a date nor a duration back from now")
	}
	return now.Add(-d), nil
}

// replayed is one session's line of the table.
type replayed struct {
	Session string         `json:"session"`
	Report  *replay.Report `json:"report,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// verdict is a replayed session's result in a word, and where for a
// divergence.
func (r replayed) verdict() (string, string) {
	switch {
	case r.Error != "":
		return "error", r.Error
	case r.Report.Identical:
		return "identical", r.Report.Summary()
	}
	d := r.Report.Divergence
	return "diverged", fmt.Sprintf("at turn %d step %d: %s", d.Turn, d.Step, d.Summary)
}

// allReport is what replay --all --json prints.
type allReport struct {
	Sessions  []replayed `json:"sessions"`
	Identical int        `json:"identical"`
	Diverged  int        `json:"diverged"`
	Errors    int        `json:"errors"`
	// Skipped counts the sessions left out: replays' live sessions, and
	// sub-agents' when a flag changes the definition.
	Skipped int `json:"skipped"`
}

// replayAll is replay --all.
func replayAll(ctx context.Context, g *globals, req wire.ReplayRequest, o allOptions) error {
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	changed := req.SystemPrompt != nil || req.Model != "" || req.Tools != nil || req.MaxSteps != nil
	sids, skipped, err := c.replayable(ctx, o, changed)
	if err != nil {
		return err
	}
	st := newStyle(g, g.stderr)
	fmt.Fprintln(g.stderr, st.dim(fmt.Sprintf("Replaying %s (%d skipped: replays, or sub-agents under a changed definition), %d at a time; no model asked, no tool run",
		plural(len(sids), "session"), skipped, o.concurrency)))
	out := allReport{Sessions: c.replayEach(ctx, req, sids, o.concurrency), Skipped: skipped}
	for _, r := range out.Sessions {
		switch v, _ := r.verdict(); v {
		case "identical":
			out.Identical++
		case "diverged":
			out.Diverged++
		default:
			out.Errors++
		}
	}
	if g.json {
		err = printJSON(g.stdout, out)
	} else {
		err = printAll(g, out)
	}
	switch {
	case err != nil:
		return err
	case out.Diverged > 0:
		return exitStatus(exitDiverged)
	case out.Errors > 0:
		return exitStatus(exitFailed)
	}
	return nil
}

// replayable lists the sessions replay --all replays, most recently
// updated first, and counts those it skips: replays' live sessions
// (labelled wire.LabelReplayOf), and sub-agents' sessions when changed (a
// flag changes the definition, which is not theirs).
func (c *conn) replayable(ctx context.Context, o allOptions, changed bool) ([]string, int, error) {
	var sids []string
	skipped := 0
	req := wire.ListRequest{Limit: wire.ListMax}
	for {
		page, err := c.List(ctx, req)
		if err != nil {
			return nil, 0, c.failed(wire.EndpointList, err)
		}
		for _, s := range page.Sessions {
			if !o.since.IsZero() && s.UpdatedAt.Before(o.since) {
				return sids, skipped, nil // the rest are older still
			}
			if !hasLabels(s.Labels, o.labels) {
				continue
			}
			if _, replay := s.Labels[wire.LabelReplayOf]; replay || changed && s.Parent != nil {
				skipped++
				continue
			}
			sids = append(sids, s.ID)
		}
		if page.Next == "" || len(page.Sessions) == 0 {
			return sids, skipped, nil
		}
		req.Before = page.Next
	}
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// replayEach replays sids, n at a time, each as req says, and returns
// their results in sids' order; a line on stderr says each as it ends.
func (c *conn) replayEach(ctx context.Context, req wire.ReplayRequest, sids []string, n int) []replayed {
	out := make([]replayed, len(sids))
	next := make(chan int)
	var mu sync.Mutex // the progress lines
	done := 0
	var wg sync.WaitGroup
	for range min(n, len(sids)) {
		wg.Add(1)
		go func() { // ends when next is closed
			defer wg.Done()
			for i := range next {
				out[i] = c.replayOne(ctx, req, sids[i])
				mu.Lock()
				done++
				v, where := out[i].verdict()
				fmt.Fprintf(c.g.stderr, "[%d/%d] %s %s: %s\n", done, len(sids), sids[i], v, where)
				mu.Unlock()
			}
		}()
	}
	for i := range sids {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// replayOne replays session sid as req says.
func (c *conn) replayOne(ctx context.Context, req wire.ReplayRequest, sid string) replayed {
	req.Session = sid
	r, err := c.Replay(ctx, req)
	if err != nil {
		return replayed{Session: sid, Error: c.failed(wire.EndpointReplay, err).Error()}
	}
	return replayed{Session: sid, Report: &r}
}

// printAll writes replay --all's table and its totals.
func printAll(g *globals, out allReport) error {
	st := newStyle(g, g.stdout)
	var t table
	t.add(cell{"SESSION", st.bold}, cell{"RESULT", st.bold}, cell{"WHERE", st.bold})
	for _, r := range out.Sessions {
		v, where := r.verdict()
		paint := st.green
		switch v {
		case "diverged":
			paint = st.yellow
		case "error":
			paint = st.red
		}
		t.add(plain(r.Session), cell{v, paint}, plain(oneLine(where, 100)))
	}
	if len(out.Sessions) > 0 {
		if err := t.write(g.stdout); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(g.stdout, "%s: %d identical, %d diverged, %d failed; %d skipped\n",
		plural(len(out.Sessions), "session"), out.Identical, out.Diverged, out.Errors, out.Skipped)
	return err
}
