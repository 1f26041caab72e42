package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Without its packages the Restate peer is not run, and says how to get
// them; the report's rows say so beside TAH's figures.
func TestRestateNotInstalled(t *testing.T) {
	cfg := Default()
	cfg.Tmp, cfg.RestateDir = t.TempDir(), t.TempDir()
	got := runRestate(context.Background(), cfg, 0)
	if got.NotRun == "" || got.Setting != restateFsync || got.Concurrent != nil {
		t.Fatalf("Restate without its packages: %+v", got)
	}
	rep := &Report{Peer: &PeerResult{Steps: 20, Turns: 5, Sessions: 16, SessionTurns: 3, Rows: []*PeerRow{{
		Durability: "fsync always", Synchronous: "FULL", TAHPerStep: time.Millisecond, NotRun: "no Node.js",
		TAHConcurrent: &PeerConcurrent{Steps: 960, StepsPerSec: 300, PerStep: 50 * time.Millisecond, CPUPerStep: time.Millisecond},
		Restate:       got,
	}}}}
	rows := rep.peerRows()
	if len(rows) != 3 || !strings.Contains(rows[1].floor, got.NotRun) || !strings.Contains(rows[2].tah, "300 steps/s") {
		t.Fatalf("rows %+v", rows)
	}
}

// The Restate peer at tiny sizes, where it can run (its packages from `make
// bench-deps`, root for its network namespace), without fsync (the setting
// the driver writes into restate-server's configuration): a time per step
// and a concurrent rate of every step asked for.
func TestRestatePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts restate-server: not in -short")
	}
	dir := filepath.Join("peer", "restate")
	if _, why := restateCommand(context.Background(), dir); why != "" {
		t.Skip("the Restate peer cannot run here: " + why)
	}
	cfg := Default()
	cfg.Tmp, cfg.RestateDir = t.TempDir(), dir
	cfg.PeerSteps, cfg.PeerTurns, cfg.PeerSessions, cfg.PeerSessionTurns = 3, 1, 2, 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := runRestate(ctx, cfg, 2*time.Minute)
	if got.NotRun != "" {
		t.Fatal(got.NotRun)
	}
	if c := got.Concurrent; got.Setting != restateNoFsync || got.PerStep <= 0 || c == nil || c.Steps != 6 || c.StepsPerSec <= 0 || c.PerStep <= 0 || c.CPUPerStep <= 0 {
		t.Fatalf("%+v %+v", got, c)
	}
}
