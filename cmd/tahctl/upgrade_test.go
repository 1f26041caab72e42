package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/tahtest/upgradetest"
)

// TestUpgradeCluster: `tahctl upgrade-cluster`, run in a new node's data
// directory, copies an old cluster's sessions into it with the node's
// credential; run again, it is refused with what to do, exit 1.
func TestUpgradeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster: not in -short")
	}
	old := upgradetest.OldCluster(t)
	nb, dir := upgradetest.NewNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	upgrade := func() (string, error) {
		var out, errb bytes.Buffer
		g := &globals{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, timeout: 10 * time.Second}
		err := run(ctx, g, []string{"--data-dir", dir, "--server", nb.ClientURL(),
			"upgrade-cluster", "--from", old.URL, "--from-credentials", old.Credentials})
		report(&errb, err)
		return out.String() + errb.String(), err
	}
	out, err := upgrade()
	if err != nil {
		t.Fatalf("upgrade-cluster: %v\n%s", err, out)
	}
	for _, want := range []string{"TAH_EVT_", "message(s) copied", "KV_tah_nodes", "skipped", "`tahctl list` shows the sessions"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	for sid, want := range old.Sessions {
		if evs, _, err := nb.Replay(ctx, sid, 1); err != nil || len(evs) != len(want) {
			t.Errorf("%s: %d events after the upgrade (%v), want %d", sid, len(evs), err, len(want))
		}
	}
	out, err = upgrade()
	if exitCode(err) != exitFailed || !strings.Contains(out, "holds") || !strings.Contains(out, "Try: start the new cluster on new data directories") {
		t.Errorf("a second upgrade-cluster: exit %d\n%s", exitCode(err), out)
	}
}
