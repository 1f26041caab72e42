package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/openai"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis: the fields count after
	// the last ')'. utime 150 ticks, stime 50: 2 s.
	stat := "4242 (tah (node) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 9 0 123 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 2*time.Second {
		t.Fatalf("got %v, %v; want 2s", got, err)
	}
	if _, err := parseStatCPU("4242 (short) S 1"); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
	// This process's own line parses, and it has used some CPU.
	if cpu, err := processCPU(os.Getpid()); err != nil || cpu < 0 {
		t.Fatalf("own CPU %v, %v", cpu, err)
	}
}

func TestSpread(t *testing.T) {
	ids := []string{"n0", "n1", "n2"}
	place := func(at ...string) map[string]string {
		m := map[string]string{}
		for i, id := range at {
			m[fmt.Sprintf("s%d", i)] = id
		}
		return m
	}
	for _, c := range []struct {
		p  map[string]string
		ok bool
	}{
		{place("n0", "n1", "n2", "n0", "n1", "n2", "n0", "n1", "n2"), true},
		{place("n0", "n1", "n2", "n0"), true},
		{place("n0", "n0", "n0", "n0", "n1", "n2"), false}, // 4 against 1
		{place("n0", "n0", "n1", "n1"), false},             // n2 holds none
		{place("n0", "?", "n1", "n2"), false},              // a stream without a server
	} {
		if err := spread(c.p, ids); (err == nil) != c.ok {
			t.Errorf("%v: %v, want spread %v", c.p, err, c.ok)
		}
	}
}

// placed wants each shard with the node that pulls its partitions, and
// falls back to spread when the partitions do not go by shard.
func TestPlaced(t *testing.T) {
	ids := []string{"n0", "n1", "n2"}
	recs := []wire.NodeRecord{{Node: "n0", Partitions: []int{0, 4}}, {Node: "n1", Partitions: []int{1, 5, 2, 6}}, {Node: "n2", Partitions: []int{3, 7}}}
	at := map[string]string{wire.EventShardStream(0): "n0", wire.EventShardStream(1): "n1", wire.EventShardStream(2): "n1",
		wire.EventShardStream(3): "n2", wire.InputStream: "n2"}
	if err := placed(at, ids, recs, 8, 4, 1); err != nil {
		t.Fatalf("placed: %v", err)
	}
	at[wire.EventShardStream(2)] = "n2"
	if err := placed(at, ids, recs, 8, 4, 1); err == nil || !strings.Contains(err.Error(), "TAH_EVT_2 on n2, its sessions' node n1") {
		t.Fatalf("a shard away from its node: %v", err)
	}
	if err := placed(at, ids, recs, 8, 4, 3); err == nil || !strings.Contains(err.Error(), "TAH_EVT_0 led from n0, its sessions' node") {
		t.Fatalf("R3: a shard led from its node's server: %v", err)
	}
	if err := placed(at, ids, recs[:2], 8, 4, 1); err == nil {
		t.Fatal("a shard no node pulls")
	}
	if err := placed(map[string]string{"a": "n0", "b": "n0", "c": "n0"}, ids, recs, 6, 4, 1); err == nil {
		t.Fatal("6 partitions over 4 shards: not spread, and not by shard")
	}
}

func TestBehindOf(t *testing.T) {
	if n := behindOf([]uint64{10, 20, 5}, []uint64{10, 15, 7}); n != 5 {
		t.Fatalf("behind %d, want 5 (a position past the captured end counts 0)", n)
	}
	if n := behindOf([]uint64{10, 20}, []uint64{4}); n != 26 {
		t.Fatalf("behind %d, want 26 (a shard never applied is behind by all of it)", n)
	}
}

// The model speaks the OpenAI wire format to TAH's own OpenAI provider,
// streamed and not: a call of the tool while the conversation does not end
// with a tool's result, then an answer; it counts what it answered.
func TestScaleModel(t *testing.T) {
	m, err := startScaleModel(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	p, err := openai.New(llm.Config{Provider: "openai", BaseURL: m.baseURL(), Model: "bench-scale"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := p.Generate(ctx, llm.Request{Messages: []llm.Message{llm.User("hello")}})
	if err != nil || len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != scaleTool {
		t.Fatalf("first answer %+v, %v: want a call of %s", first, err, scaleTool)
	}
	call := first.ToolCalls[0]
	convo := []llm.Message{llm.User("hello"), llm.Assistant("", call), llm.ToolResult(call, "README.md", false)}
	var deltas strings.Builder
	final, err := p.Stream(ctx, llm.Request{Messages: convo}, func(d llm.Delta) { deltas.WriteString(d.Text) })
	if err != nil || final.Content != "done" || len(final.ToolCalls) != 0 || deltas.String() != "done" {
		t.Fatalf("final answer %+v (deltas %q), %v", final, deltas.String(), err)
	}
	if m.answered.Load() != 2 || m.failed.Load() != 0 {
		t.Fatalf("answered %d, failed %d", m.answered.Load(), m.failed.Load())
	}
}

// A cgroup confines a process that spins: it is throttled, its CPU is read,
// and the cgroup is removed once it is gone, as is a dead run's leftover.
func TestCPUCgroup(t *testing.T) {
	if err := checkCgroups(); err != nil {
		t.Skip(err)
	}
	g, err := newCPUCgroup("test-"+filepath.Base(t.Name()), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	q, err := os.ReadFile(filepath.Join(g.dir, "cpu.cfs_quota_us"))
	if err != nil || strings.TrimSpace(string(q)) != "10000" {
		t.Fatalf("quota %q, %v; want 10000 µs of each 100 ms", q, err)
	}
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, g.procs(), "/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	defer kill()
	err = natstest.Poll(30*time.Second, 20*time.Millisecond, func() error {
		procs, err := os.ReadFile(g.procs())
		if err != nil {
			return err
		}
		if !strings.Contains("\n"+string(procs), fmt.Sprintf("\n%d\n", pid)) {
			return fmt.Errorf("pid %d not in %q", pid, procs)
		}
		thr, periods, err := g.throttled()
		if err != nil {
			return err
		}
		if cpu, err := processCPU(pid); err != nil || cpu <= 0 || thr <= 0 || periods <= 0 {
			return fmt.Errorf("CPU %v (%v), throttled %v in %d periods", cpu, err, thr, periods)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(g.dir); err == nil {
		t.Fatal("a cgroup holding a process was removed")
	}
	kill()
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there: %v", g.dir, err)
	}
	// A cgroup left by a run whose process is gone (pid's, now dead) goes;
	// this run's stays.
	stale := filepath.Join(cgroupCPURoot, fmt.Sprintf("%s%d-n0", cgroupPrefix, pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	own, err := newCPUCgroup("test-own", 0.1)
	if err != nil {
		t.Fatal(err)
	}
	defer own.remove()
	removeStaleCgroups()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(stale)
		t.Fatalf("the dead run's cgroup %s stayed: %v", stale, err)
	}
	if _, err := os.Stat(own.dir); err != nil {
		t.Fatalf("this run's cgroup went: %v", err)
	}
}

// Row 9 on two clusters at tiny sizes: one node, then three (one read model
// and two workers), each a process of this test binary as tah-node
// (TestMain) in a cgroup; the report has every figure, and no cgroup stays.
func TestScaleRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs clusters of processes: not in -short")
	}
	if err := checkCgroups(); err != nil {
		t.Skip(err)
	}
	c := Default()
	c.Rows, c.Tmp, c.Executable = []string{"9"}, t.TempDir(), os.Args[0]
	c.ScaleSessions, c.ScaleDelay, c.ScaleDuration, c.ScaleQuota, c.ScaleCurve = 4, 5*time.Millisecond, 2*time.Second, 1, nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep := newReport(c)
	for _, sp := range []scaleSpec{{nodes: 1, replicas: 1, quota: 1}, {nodes: 3, replicas: 1, quota: 1}} {
		if err := runScenario(ctx, &scaleScenario{cfg: c, spec: sp}, rep, io.Discard, &harnessLog{}); err != nil {
			t.Fatal(err)
		}
	}
	s := rep.Scale
	if s == nil || s.NotRun != "" || len(s.Runs) != 2 {
		t.Fatalf("row 9: %+v", s)
	}
	for _, r := range s.Runs {
		if r.Steps <= 0 || r.StepsPerSec <= 0 || r.Turns <= 0 || r.Failed != 0 || r.CPUPerStep <= 0 || len(r.NodeStats) != r.Nodes || len(r.Placement) != 9 {
			t.Errorf("%d node(s): %+v", r.Nodes, r)
		}
		for _, nd := range r.NodeStats {
			if nd.CPU <= 0 || nd.ReadModel != (nd.ID == "n0") || (nd.ReadModel && nd.CatchUp < 0) {
				t.Errorf("%d node(s), node %+v", r.Nodes, nd)
			}
		}
		if !r.Balanced {
			t.Errorf("%d node(s): the streams were not placed with their sessions' nodes: %v", r.Nodes, r.Placement)
		}
	}
	if table := rep.Table(); !strings.Contains(table, "≥ 2.4× one node") {
		t.Errorf("table:\n%s", table)
	}
	left, _ := filepath.Glob(filepath.Join(cgroupCPURoot, fmt.Sprintf("%s%d-*", cgroupPrefix, os.Getpid())))
	if len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// A report without cgroups says why in the row, and sets no target verdict.
func TestScaleNotRun(t *testing.T) {
	rep := &Report{Scale: &ScaleResult{NotRun: "running as uid 1000, not root: " + ErrNoCgroup.Error()}}
	rows := rep.scaleRows()
	if len(rows) != 1 || !strings.Contains(rows[0].tah, "not run: running as uid 1000") || rows[0].verdict != "" {
		t.Fatalf("rows %+v", rows)
	}
	var b strings.Builder
	rep.scaleTarget(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	if !strings.Contains(b.String(), "not run here") {
		t.Fatalf("target line %q", b.String())
	}
}

// Row 9's ratios are over the mean of its one-node runs of the same
// quota, the one before the three-node runs and the one after.
func TestScaleRatioOverOneNodesMean(t *testing.T) {
	s := &ScaleResult{Runs: []*ScaleRun{
		{Nodes: 1, Replicas: 1, ReadModels: 1, Quota: 0.5, StepsPerSec: 600, CPUBound: 1000},
		{Nodes: 3, Replicas: 1, ReadModels: 1, Quota: 0.5, StepsPerSec: 1750, CPUBound: 3000},
		{Nodes: 1, Replicas: 1, ReadModels: 1, Quota: 0.5, StepsPerSec: 800, CPUBound: 1400, Again: true},
	}, Curve: []*ScaleRun{{Nodes: 1, Replicas: 1, ReadModels: 1, Quota: 0.25, StepsPerSec: 100}}}
	if got := s.ratio(s.Runs[1]); got != 2.5 {
		t.Errorf("ratio %v, want 2.5 (1,750 over the mean of 600 and 800)", got)
	}
	if got := s.cpuRatio(s.Runs[1]); got != 2.5 {
		t.Errorf("CPU ratio %v, want 2.5", got)
	}
	if got := s.baseRuns(s.Runs[1]); got != "the mean of one node's 600/s before and 800/s after" {
		t.Errorf("base runs %q", got)
	}
	if got := s.Runs[2].layout(); got != "1 node, again after the 3-node runs" {
		t.Errorf("layout %q", got)
	}
}
