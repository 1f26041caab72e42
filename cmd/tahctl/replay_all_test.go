package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/cmd/node/nodecmd"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// TestReplayAllOf200Sessions: replay --all over 200 recorded sessions and
// a replay's live session (tahctl replay --live) reports each of the 200,
// a line on stderr as each ends and a row of the table, and skips the live
// one: identical under the node's own definition (exit 0), each diverged
// at turn 1 step 1 under another system prompt (exit 7); --label keeps the
// sessions labelled so.
func TestReplayAllOf200Sessions(t *testing.T) {
	const sessions, labelled = 200, 10
	dir := filepath.Join(t.TempDir(), ".tah")
	// No tools: the demo model answers each turn in one step.
	args := []string{"--data-dir", dir, "--nats-port", "0", "--http", "", "--tools-builtin=false", "--tools-remote=false",
		"--llm-mock-pace", "0s", "--system-prompt", "You echo.", "--log-level", "warn"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // catches a hang only
	defer cancel()
	nodeCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- nodecmd.Run(nodeCtx, args, io.Discard, io.Discard) }() // owned here: ends with stop below
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("the node: %v", err)
		}
	}()
	info := waitNodeInfo(t, dir, ran)
	c, err := client.Connect(ctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sids := recordSessions(ctx, t, c, sessions, labelled)

	prompt := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(prompt, []byte("You echo, loudly.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tahctl := func(args ...string) (string, string, error) {
		g, out, errb := testGlobals(nil)
		g.timeout = 30 * time.Second
		err := run(ctx, g, append(args, "--data-dir", dir))
		return out.String(), errb.String(), err
	}
	if out, errb, err := tahctl("replay", sids[0], "--live", "--system-prompt-file", prompt); exitCode(err) != exitDiverged || !strings.Contains(errb, "live: session ") {
		t.Fatalf("replay --live: %v\n%s\n%s", err, out, errb)
	}
	waitListed(ctx, t, c, sessions+1) // the read model lists what the log holds a moment later

	out, errb, err := tahctl("replay", "--all", "--json", "--concurrency", "8")
	var all allReport
	if err != nil || json.Unmarshal([]byte(out), &all) != nil {
		t.Fatalf("replay --all: %v\n%s\n%s", err, out, errb)
	}
	if len(all.Sessions) != sessions || all.Identical != sessions || all.Skipped != 1 || all.Diverged+all.Errors != 0 {
		t.Fatalf("replay --all: %d sessions, %d identical, %d skipped, %d diverged, %d errors", len(all.Sessions), all.Identical, all.Skipped, all.Diverged, all.Errors)
	}
	if n := len(regexp.MustCompile(fmt.Sprintf(`(?m)^\[\d+/%d\] s_\w+ identical: `, sessions)).FindAllString(errb, -1)); n != sessions {
		t.Errorf("%d progress lines, want one per session:\n%s", n, errb)
	}

	out, _, err = tahctl("replay", "--all", "--system-prompt-file", prompt, "--concurrency", "8")
	if exitCode(err) != exitDiverged {
		t.Fatalf("another prompt: %v, want exit %d\n%s", err, exitDiverged, out)
	}
	for _, sid := range sids {
		if !regexp.MustCompile(`(?m)^` + sid + ` +diverged +at turn 1 step 1: the request differs$`).MatchString(out) {
			t.Fatalf("no row says %s diverged at turn 1 step 1:\n%s", sid, out)
		}
	}
	if !strings.HasSuffix(out, fmt.Sprintf("%d sessions: 0 identical, %d diverged, 0 failed; 1 skipped\n", sessions, sessions)) {
		t.Errorf("the totals:\n%s", out)
	}

	out, _, err = tahctl("replay", "--all", "--label", "suite=a", "--json")
	if err != nil || json.Unmarshal([]byte(out), &all) != nil || len(all.Sessions) != labelled || all.Identical != labelled {
		t.Fatalf("replay --all --label: %v %+v", err, all)
	}
}

// waitListed waits until tah.api.list lists n sessions.
func waitListed(ctx context.Context, t *testing.T, c *client.Client, n int) {
	t.Helper()
	for {
		l, err := c.List(ctx, wire.ListRequest{Limit: wire.ListMax})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Sessions) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the list holds %d sessions, not %d", len(l.Sessions), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitNodeInfo waits for the node of data directory dir to write its
// node.json, or for it to end.
func waitNodeInfo(t *testing.T, dir string, ran <-chan error) localnode.NodeInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if info, err := localnode.ReadNodeInfo(dir); err == nil {
			return info
		}
		select {
		case err := <-ran:
			t.Fatalf("the node ended before it was ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the node wrote no node.json within a minute")
		}
	}
}

// recordSessions records n sessions of one completed turn each, the first
// labelled of them labelled suite=a, 16 at a time, and returns their ids.
func recordSessions(ctx context.Context, t *testing.T, c *client.Client, n, labelled int) []string {
	t.Helper()
	sids := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // ends with its session's turn
			defer func() { <-sem; wg.Done() }()
			req := wire.CreateRequest{}
			if i < labelled {
				req.Labels = map[string]string{"suite": "a"}
			}
			r, err := c.Create(ctx, req)
			if err != nil {
				errs <- err
				return
			}
			sids[i] = r.Session
			turn, err := c.Run(ctx, r.Session, wire.Input{Text: fmt.Sprintf("hello %d", i)})
			if err != nil {
				errs <- err
				return
			}
			defer turn.Close()
			if o, err := turn.Outcome(ctx); err != nil || o.Status != "completed" {
				errs <- fmt.Errorf("session %s: %+v %v", r.Session, o, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return sids
}
