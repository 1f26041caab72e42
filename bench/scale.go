package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// ScaleResult is row 9: the steps/s of a model-bound load on clusters of
// tah-node processes, each confined to the same CPU quota by a cgroup (as
// if each were a small machine of its own), driven through package client
// from this process, outside the quotas.
type ScaleResult struct {
	// NotRun says why the row could not run here (no cgroup v1 cpu
	// controller, not root); nothing else is set then.
	NotRun     string        `json:"not_run,omitempty"`
	Durability string        `json:"durability"`
	Sync       time.Duration `json:"sync_interval_ns"`
	Sessions   int           `json:"sessions"`
	LLMDelay   time.Duration `json:"llm_delay_ns"`
	// CatchUpWithin bounds the wait for a read model to apply what the log
	// held at the window's end.
	CatchUpWithin time.Duration `json:"catch_up_within_ns"`
	// Runs are the comparison: one node, then three at R1 and at R3, each
	// in the recommended layout (one read-model node, the others workers)
	// and with every node holding a read model; Curve the same load on 1,
	// 2, 3, 5... nodes at a smaller quota (R1, the recommended layout).
	Runs  []*ScaleRun `json:"runs"`
	Curve []*ScaleRun `json:"curve,omitempty"`
	// Floor is what the NATS servers alone allow at R3 in the same quotas
	// (Config.ScaleFloor; scale_floor.go): a run per server count.
	Floor []*ScaleRun `json:"floor,omitempty"`
}

// ScaleRun is one cluster's measurement.
type ScaleRun struct {
	Nodes    int `json:"nodes"`
	Replicas int `json:"replicas"`
	// Floor marks a run of the floor: the NATS servers alone.
	Floor bool `json:"floor,omitempty"`
	// Again marks the one-node run after the three-node ones (scaleSpecs).
	Again bool `json:"again,omitempty"`
	// ReadModels is how many of the nodes hold a read model (the others are
	// workers, read_model=false).
	ReadModels int     `json:"read_models"`
	Quota      float64 `json:"quota_cpus"`
	// Window is the measured span; Steps the LLM steps the model answered
	// in it (a turn is a tool step and a final step).
	Window      time.Duration `json:"window_ns"`
	Steps       int64         `json:"steps"`
	StepsPerSec float64       `json:"steps_per_s"`
	// ModelBound is every session waiting only for its model.
	ModelBound float64 `json:"model_bound_per_s"`
	// Turns counts the turns completed in the window; Failed the turns that
	// failed from the ramp's start to the load's end, FirstFailure the first
	// one's error.
	Turns        int64  `json:"turns"`
	Failed       int64  `json:"failed_turns"`
	FirstFailure string `json:"first_failure,omitempty"`
	// CPUPerStep is every node's CPU in the window over the cluster's steps.
	CPUPerStep time.Duration `json:"cpu_per_step_ns"`
	// CPUBound is the steps/s the nodes would make if each had its whole
	// quota and spent it at CPUPerStep: on a shared machine a node may get
	// less than its quota (ScaleNode.Busy says how much it got).
	CPUBound  float64     `json:"cpu_bound_per_s"`
	NodeStats []ScaleNode `json:"node_stats"`
	// Placement is, for each of the streams that carry the load (the log's
	// shards and TAH_IN), the node whose server holds it (R1) or leads it
	// (R3) at the end; Balanced whether they were placed (each shard with
	// the node that runs its sessions, see placed) when the measurement
	// began.
	Placement map[string]string `json:"placement"`
	Balanced  bool              `json:"balanced_at_start"`
	// FloorRecords, in a run of the floor, are the records of the turn its
	// writers append (two steps a turn).
	FloorRecords []FloorRecord `json:"floor_records,omitempty"`
	// Setup is how long the cluster took to start, settle and warm up.
	Setup time.Duration `json:"setup_ns"`
	// ClientCPUs is this process's CPUs busy in the window (the sessions'
	// clients and the model, outside the quotas); LoadAvg the machine's
	// load average at the window's end: the machine is shared.
	ClientCPUs float64 `json:"client_cpus_busy"`
	LoadAvg    string  `json:"loadavg"`
}

// FloorRecord is one record of the floor's turn: its events' types and its
// body's size.
type FloorRecord struct {
	Events string `json:"events"`
	Bytes  int    `json:"bytes"`
}

// ScaleNode is one node of a run.
type ScaleNode struct {
	ID        string `json:"id"`
	ReadModel bool   `json:"read_model"`
	// CPU is the process's user + system time in the window; CPUPerStep it
	// over the cluster's steps; Busy it over the window (at most the quota).
	CPU        time.Duration `json:"cpu_ns"`
	CPUPerStep time.Duration `json:"cpu_per_cluster_step_ns"`
	Busy       float64       `json:"cpus_busy"`
	// Throttled is how long the quota held the node back in the window.
	Throttled time.Duration `json:"throttled_ns"`
	// Streams are the load's streams its server holds (R1) or leads (R3)
	// at the end.
	Streams []string `json:"streams,omitempty"`
	// Behind is, for a read-model node, how many records of the log it had
	// still to apply when the window ended; CatchUp how long after the
	// window's end it had applied them, the load going on (-1: not within
	// scaleCatchUpWithin): how stale its reads were.
	Behind  int64         `json:"read_model_behind_records,omitempty"`
	CatchUp time.Duration `json:"read_model_catch_up_ns,omitempty"`
}

// Row 9's bounds.
const (
	// scaleSettleWithin bounds the wait for the streams to be spread over
	// the servers before the measurement.
	scaleSettleWithin = time.Minute
	// scaleCatchUpWithin bounds the wait for a read model to apply what the
	// log held when the measurement ended.
	scaleCatchUpWithin = 30 * time.Second
	// scaleDrainWithin bounds the wait for the turns in flight when the
	// load stops.
	scaleDrainWithin = 2 * time.Minute
)

// Row 9's targets: 3 nodes' steps/s over one node's, in the recommended
// layout.
const (
	targetScaleR1 = 2.4
	targetScaleR3 = 2.0
)

// scaleSpec is one cluster of row 9.
type scaleSpec struct {
	nodes, replicas int
	// allReadModels gives every node a read model; else only n0 holds one.
	allReadModels bool
	quota         float64
	curve         bool
	// floor measures the NATS servers alone (scale_floor.go): every node a
	// worker, no session but a probe's.
	floor bool
	// again is the one-node run after the three-node ones (scaleSpecs).
	again bool
}

func (p scaleSpec) readModel(i int) bool { return !p.floor && (p.allReadModels || i == 0) }

func (p scaleSpec) readModels() int {
	switch {
	case p.floor:
		return 0
	case p.allReadModels:
		return p.nodes
	}
	return 1
}

func (p scaleSpec) String() string {
	if p.floor {
		return fmt.Sprintf("the floor: %d NATS servers alone (tah-node workers running no session), R%d, %s CPU each", p.nodes, p.replicas, trimFloat(p.quota))
	}
	layout := "read model on n0, the others workers"
	switch {
	case p.nodes == 1 && p.again:
		layout = "with its read model, again after the 3-node runs"
	case p.nodes == 1:
		layout = "with its read model"
	case p.nodes == 2 && !p.allReadModels:
		layout = "read model on n0, n1 a worker"
	case p.allReadModels:
		layout = "read models on all"
	}
	return fmt.Sprintf("%d node(s), R%d, %s, %s CPU each", p.nodes, p.replicas, layout, trimFloat(p.quota))
}

// scaleSpecs are row 9's clusters, in the order they run: a one-node run
// first and another after the three-node runs, whose mean is the base of
// the ratios (a machine that drifts between them, busier or quieter, moves
// both halves of a ratio alike).
func scaleSpecs(c Config) []scaleSpec {
	q := c.ScaleQuota
	out := []scaleSpec{{nodes: 1, replicas: 1, quota: q}}
	for _, r := range []int{1, 3} {
		out = append(out, scaleSpec{nodes: 3, replicas: r, quota: q}, scaleSpec{nodes: 3, replicas: r, allReadModels: true, quota: q})
	}
	out = append(out, scaleSpec{nodes: 1, replicas: 1, quota: q, again: true})
	for _, n := range c.ScaleFloor {
		out = append(out, scaleSpec{nodes: n, replicas: 3, quota: q, floor: true})
	}
	for _, n := range c.ScaleCurve {
		out = append(out, scaleSpec{nodes: n, replicas: 1, quota: c.ScaleCurveQuota, curve: true})
	}
	return out
}

// scaleScenario is one cluster of row 9.
type scaleScenario struct {
	cfg    Config
	spec   scaleSpec
	env    Env
	notRun string
	model  *scaleModel
	groups []*cpuCgroup
	c      *tahtest.Cluster
	cls    []*client.Client
	begin  time.Time
}

func (s *scaleScenario) Name() string {
	return fmt.Sprintf("row 9: %d sessions on %s, %s", s.cfg.ScaleSessions, s.spec, durabilityName(s.cfg.ScaleSync))
}

func (s *scaleScenario) sid(i int) string { return fmt.Sprintf("s_scale%05d", i) }

// Setup makes the nodes' cgroups, starts the model and the cluster (each
// node a process of this program as tah-node, which moves itself into its
// cgroup before it execs), waits until the partitions and the streams are
// spread, and connects a client to each node's server. Where cgroups
// cannot be made it does nothing: Run reports why.
func (s *scaleScenario) Setup(ctx context.Context, env Env) error {
	s.env, s.begin = env, time.Now()
	if err := checkCgroups(); err != nil {
		s.notRun = err.Error()
		env.Note("skipped: %v", err)
		return nil
	}
	removeStaleCgroups()
	// Registered before the cluster's own cleanup, so that it runs after it:
	// a cgroup can be removed only once its process is gone.
	env.TB.Cleanup(s.removeGroups)
	for i := range s.spec.nodes {
		g, err := newCPUCgroup(fmt.Sprintf("n%d", i), s.spec.quota)
		if err != nil {
			return err
		}
		s.groups = append(s.groups, g)
	}
	var err error
	if s.model, err = startScaleModel(s.cfg.ScaleDelay); err != nil {
		return err
	}
	env.TB.Cleanup(s.model.close)
	s.c = tahtest.Start(env.TB, tahtest.Options{Nodes: s.spec.nodes, Replicas: s.spec.replicas, Sync: s.cfg.ScaleSync, Dir: s.cfg.Tmp,
		Mode: tahtest.Process, Command: s.command, EditConfig: s.editConfig})
	if _, err := s.c.BalancedWithin(time.Minute, s.c.IDs()...); err != nil {
		return err
	}
	l := s.c.Layout()
	for i := range s.spec.nodes {
		cl, err := client.Connect(ctx, client.Options{URL: l.Slots[i].URL(), CredsFile: l.Creds, Name: "tah-bench scale",
			RequestTimeout: clientTimeout})
		if err != nil {
			return err
		}
		s.cls = append(s.cls, cl)
	}
	return nil
}

// command runs node i as this program's tah-node, in cgroup i: the shell
// writes its own pid to the cgroup, then execs the node under the same pid
// (what the harness waits for in node.json), so that every thread of the
// node starts confined.
func (s *scaleScenario) command(i int, args []string) *exec.Cmd {
	argv := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, s.groups[i].procs(), s.cfg.Executable, "-" + NodeFlag, "--"}, args...)
	return exec.Command("/bin/sh", argv...)
}

// editConfig makes node i's configuration the row's: the model over HTTP,
// the read model or not, and a quiet log (the log's writes would count in
// the quota).
func (s *scaleScenario) editConfig(i int, cfg *config.Config) {
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "openai", s.model.baseURL(), "bench-scale"
	cfg.LLM.RequestTimeout = config.Duration(time.Minute)
	cfg.ReadModel = s.spec.readModel(i)
	cfg.LogLevel = "warn"
}

func (s *scaleScenario) removeGroups() {
	for _, g := range s.groups {
		if err := g.remove(); err != nil {
			s.env.Note("%v", err)
		}
	}
}

func (s *scaleScenario) Teardown(context.Context) error {
	for _, cl := range s.cls {
		cl.Close()
	}
	return nil
}

// result is the report's row 9, made by its first scenario.
func (s *scaleScenario) result(rep *Report) *ScaleResult {
	if rep.Scale == nil {
		rep.Scale = &ScaleResult{Durability: durabilityName(s.cfg.ScaleSync), Sync: s.cfg.ScaleSync, Sessions: s.cfg.ScaleSessions, LLMDelay: s.cfg.ScaleDelay,
			CatchUpWithin: scaleCatchUpWithin}
	}
	return rep.Scale
}

// Run creates the sessions and gives each a warm-up turn (it spawns and
// claims them), then runs every session's turns back to back until the
// measurement's window has passed, and reads each node's CPU, the streams'
// placement and the read models' lag.
func (s *scaleScenario) Run(ctx context.Context, rep *Report) error {
	res := s.result(rep)
	if s.notRun != "" {
		res.NotRun = s.notRun
		return nil
	}
	if s.spec.floor {
		return s.runFloor(ctx, res)
	}
	n := s.cfg.ScaleSessions
	if err := parallel(ctx, n, 32, func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		_, err := s.client(i).Create(cctx, wire.CreateRequest{Session: s.sid(i)})
		return err
	}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := parallel(ctx, n, n, func(i int) error {
		_, _, err := runTurn(ctx, s.client(i), s.sid(i), "warm-up")
		return err
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	run := &ScaleRun{Nodes: s.spec.nodes, Replicas: s.spec.replicas, ReadModels: s.spec.readModels(), Quota: s.spec.quota, Again: s.spec.again}
	run.Balanced = s.waitSpread() == nil
	if !run.Balanced {
		s.env.Note("the streams were not spread within %v: %v", scaleSettleWithin, s.placement())
	}
	run.Setup = time.Since(s.begin)
	if err := s.measure(ctx, run); err != nil {
		return err
	}
	if s.spec.curve {
		res.Curve = append(res.Curve, run)
	} else {
		res.Runs = append(res.Runs, run)
	}
	s.env.Note("%s steps/s (%d steps in %s), %d failed turns, CPU per step %s; placement %v", fnum(run.StepsPerSec), run.Steps, fdur(run.Window),
		run.Failed, fdur(run.CPUPerStep), run.Placement)
	return nil
}

// runFloor measures the floor (scale_floor.go) once the streams' leaders
// are spread.
func (s *scaleScenario) runFloor(ctx context.Context, res *ScaleResult) error {
	run := &ScaleRun{Nodes: s.spec.nodes, Replicas: s.spec.replicas, Quota: s.spec.quota, Floor: true}
	run.Balanced = s.waitSpread() == nil
	if !run.Balanced {
		s.env.Note("the streams' leaders were not spread within %v: %v", scaleSettleWithin, s.placement())
	}
	run.Setup = time.Since(s.begin)
	if err := s.measureFloor(ctx, run); err != nil {
		return err
	}
	res.Floor = append(res.Floor, run)
	s.env.Note("the floor: %s steps/s (%d steps in %s; records %v), %d failed appends, the servers' CPU per step %s (%s); leaders %v; this process %.2f CPUs",
		fnum(run.StepsPerSec), run.Steps, fdur(run.Window), run.FloorRecords, run.Failed, fdur(run.CPUPerStep), run.cpuPerStep(), run.Placement, run.ClientCPUs)
	return nil
}

// client is session i's client: the sessions are spread over the nodes'
// servers.
func (s *scaleScenario) client(i int) *client.Client { return s.cls[i%len(s.cls)] }

// nodeSnap is what is read of a node at each end of the window.
type nodeSnap struct {
	cpu, throttled time.Duration
}

// measure runs the load: every session's turns back to back; after a
// ramp, the window; then it stops the sessions and reads the rest.
func (s *scaleScenario) measure(ctx context.Context, run *ScaleRun) error {
	pids, err := s.pids()
	if err != nil {
		return err
	}
	var turns, failed atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := s.cfg.ScaleSessions
	for i := range n {
		wg.Go(func() {
			// A session starts i/n of an LLM call late, so that they do not
			// write in lockstep.
			select {
			case <-time.After(time.Duration(i) * s.cfg.ScaleDelay / time.Duration(n)):
			case <-stop:
				return
			}
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _, err := runTurn(lctx, s.client(i), s.sid(i), fmt.Sprintf("turn %d", k))
				switch {
				case err == nil:
					turns.Add(1)
				case lctx.Err() != nil:
					return
				default:
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	ramp := min(5*time.Second, s.cfg.ScaleDuration/4)
	time.Sleep(ramp)
	failed.Store(0)
	snap0, steps0, turns0, cpu0, t0 := s.snap(pids), s.model.answered.Load(), turns.Load(), cpuTime(), time.Now()
	select {
	case <-time.After(s.cfg.ScaleDuration):
	case <-ctx.Done():
	}
	snap1, steps1, turns1, cpu1, t1 := s.snap(pids), s.model.answered.Load(), turns.Load(), cpuTime(), time.Now()
	run.LoadAvg = loadAvg()
	// The read models' lag, the load going on: how far behind the log's end
	// at t1 each was, and how long until it had applied that much.
	behind, last, lagErr := s.readModelsBehind(ctx)
	var caught map[int]time.Duration
	if lagErr == nil {
		caught = s.catchUp(ctx, t1, last, behind)
	} else {
		s.env.Note("the read models' lag: %v", lagErr)
	}
	run.Placement = s.placement()
	close(stop)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }() // ends once the sessions' loops have
	select {
	case <-drained:
	case <-time.After(scaleDrainWithin):
		cancel()
		<-drained
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	run.Window, run.Steps = t1.Sub(t0), steps1-steps0
	run.StepsPerSec = float64(run.Steps) / run.Window.Seconds()
	run.ModelBound = float64(n) / s.cfg.ScaleDelay.Seconds()
	run.Turns, run.Failed = turns1-turns0, failed.Load()
	run.ClientCPUs = float64(cpu1-cpu0) / float64(run.Window)
	if f, ok := firstFailure.Load().(string); ok {
		run.FirstFailure = f
	}
	var total time.Duration
	for i := range s.spec.nodes {
		nd := ScaleNode{ID: s.c.ID(i), ReadModel: s.spec.readModel(i), CPU: snap1[i].cpu - snap0[i].cpu, Throttled: snap1[i].throttled - snap0[i].throttled,
			Behind: behind[i], CatchUp: caught[i]}
		total += nd.CPU
		if run.Steps > 0 {
			nd.CPUPerStep = nd.CPU / time.Duration(run.Steps)
		}
		nd.Busy = float64(nd.CPU) / float64(run.Window)
		for st, at := range run.Placement {
			if at == nd.ID {
				nd.Streams = append(nd.Streams, st)
			}
		}
		slices.Sort(nd.Streams)
		run.NodeStats = append(run.NodeStats, nd)
	}
	if run.Steps > 0 {
		run.CPUPerStep = total / time.Duration(run.Steps)
		run.CPUBound = float64(run.Nodes) * run.Quota / run.CPUPerStep.Seconds()
	}
	return nil
}

// pids are the nodes' processes (node.json, which the node writes once
// ready).
func (s *scaleScenario) pids() ([]int, error) {
	var out []int
	for i := range s.spec.nodes {
		info, err := localnode.ReadNodeInfo(s.c.Config(i).DataDir)
		if err != nil {
			return nil, fmt.Errorf("node %s's pid: %w", s.c.ID(i), err)
		}
		out = append(out, info.PID)
	}
	return out, nil
}

// snap reads each node's CPU so far and its cgroup's throttled time.
func (s *scaleScenario) snap(pids []int) []nodeSnap {
	out := make([]nodeSnap, len(pids))
	for i, pid := range pids {
		cpu, err := processCPU(pid)
		if err != nil {
			s.env.Note("node %s's CPU: %v", s.c.ID(i), err)
		}
		thr, _, err := s.groups[i].throttled()
		if err != nil {
			s.env.Note("node %s's cgroup: %v", s.c.ID(i), err)
		}
		out[i] = nodeSnap{cpu: cpu, throttled: thr}
	}
	return out
}

// loadStreams are the streams that carry the load: the log's shards and
// TAH_IN.
func (s *scaleScenario) loadStreams(shards int) []string {
	out := []string{wire.InputStream}
	for k := range shards {
		out = append(out, wire.EventShardStream(k))
	}
	return out
}

// shards is the log's shard count, as the nodes report it.
func (s *scaleScenario) shards(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	st, err := s.cls[0].Status(cctx)
	if err != nil {
		return 0, err
	}
	return st.LogShards, nil
}

// placement is, for each stream of the load, the node whose server holds
// (R1) or leads (R3) it ("?" for none).
func (s *scaleScenario) placement() map[string]string {
	out := map[string]string{}
	shards, err := s.shards(context.Background())
	if err != nil {
		return out
	}
	if s.spec.nodes == 1 { // one server, no cluster: no leader to read
		for _, st := range s.loadStreams(shards) {
			out[st] = s.c.ID(0)
		}
		return out
	}
	l := s.c.Leaders()
	for _, st := range s.loadStreams(shards) {
		at, ok := l.Streams[st]
		if !ok || at < 0 {
			out[st] = "?"
			continue
		}
		out[st] = s.c.ID(at)
	}
	return out
}

// spread reports whether no node holds (or leads) more than one of the
// load's streams over another.
func spread(placement map[string]string, ids []string) error {
	count := map[string]int{}
	for st, id := range placement {
		if !slices.Contains(ids, id) {
			return fmt.Errorf("%s has no server (%s)", st, id)
		}
		count[id]++
	}
	lo, hi := -1, 0
	for _, id := range ids {
		c := count[id]
		hi = max(hi, c)
		if lo < 0 || c < lo {
			lo = c
		}
	}
	if hi-lo > 1 {
		return fmt.Errorf("from %d to %d streams a server: %v", lo, hi, count)
	}
	return nil
}

// placed reports whether the load's streams are where the nodes put them
// (bus's placement): when the partitions are a multiple of the shards, each
// shard k of the log on the server of the node that pulls partition k (R1),
// and so all of the shard's partitions when they go by shard, or led from
// any other server (R3) (recs: node ids are server names here), the rest
// anywhere; otherwise spread.
func placed(placement map[string]string, ids []string, recs []wire.NodeRecord, partitions, shards, replicas int) error {
	if shards <= 0 || partitions < shards || partitions%shards != 0 {
		return spread(placement, ids)
	}
	home := map[string]string{}
	for _, r := range recs {
		for _, p := range r.Partitions {
			if p < shards { // shard p's home: its first partition's node (node.ShardOwners)
				home[wire.EventShardStream(p)] = r.Node
			}
		}
	}
	var wrong []string
	for st, id := range placement {
		if !slices.Contains(ids, id) {
			return fmt.Errorf("%s has no server (%s)", st, id)
		}
		switch want, ok := home[st]; {
		case ok && replicas <= 1 && want != id:
			wrong = append(wrong, fmt.Sprintf("%s on %s, its sessions' node %s", st, id, want))
		case ok && replicas > 1 && len(ids) > 1 && want == id:
			wrong = append(wrong, fmt.Sprintf("%s led from %s, its sessions' node", st, id))
		}
	}
	if len(home) < shards {
		return fmt.Errorf("the nodes pull the partitions of %d of the %d shards", len(home), shards)
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		return errors.New(strings.Join(wrong, "; "))
	}
	return nil
}

// waitSpread waits until the nodes have placed the load's streams on their
// servers (bus's placement: the streams at R1, their leaders at R3).
func (s *scaleScenario) waitSpread() error {
	return natstest.Poll(scaleSettleWithin, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		defer cancel()
		recs, err := s.c.Bus().ListNodes(ctx)
		if err != nil {
			return err
		}
		b := s.c.Bus()
		return placed(s.placement(), s.c.IDs(), recs, b.Config().Partitions, b.Shards(), s.spec.replicas)
	})
}

// lastSeqs are the log's shards' last sequences.
func (s *scaleScenario) lastSeqs(ctx context.Context) ([]uint64, error) {
	shards, err := s.shards(ctx)
	if err != nil {
		return nil, err
	}
	js := s.c.JetStream()
	out := make([]uint64, shards)
	for k := range out {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := js.Stream(cctx, wire.EventShardStream(k))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", wire.EventShardStream(k), err)
		}
		out[k] = st.CachedInfo().State.LastSeq
	}
	return out, nil
}

// readModelsBehind reads the log's end and each read model's position:
// how many records each had still to apply.
func (s *scaleScenario) readModelsBehind(ctx context.Context) (map[int]int64, []uint64, error) {
	last, err := s.lastSeqs(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := map[int]int64{}
	var errs []error
	for i := range s.spec.nodes {
		if !s.spec.readModel(i) {
			continue
		}
		pos, err := readModelPositions(ctx, s.c.Config(i).DataDir, len(last))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.c.ID(i), err))
			continue
		}
		out[i] = behindOf(last, pos)
	}
	return out, last, errors.Join(errs...)
}

// behindOf is how many records positions pos are behind the shards' last
// sequences last.
func behindOf(last, pos []uint64) int64 {
	var n int64
	for k, l := range last {
		if k < len(pos) && pos[k] < l {
			n += int64(l - pos[k])
		} else if k >= len(pos) {
			n += int64(l)
		}
	}
	return n
}

// catchUp waits, the load going on, for each read model to apply what the
// log held at t1 (last), and returns how long after t1 each had (-1: not
// within scaleCatchUpWithin).
func (s *scaleScenario) catchUp(ctx context.Context, t1 time.Time, last []uint64, behind map[int]int64) map[int]time.Duration {
	out := map[int]time.Duration{}
	for i := range behind {
		err := natstest.Poll(scaleCatchUpWithin-time.Since(t1), 50*time.Millisecond, func() error {
			pos, err := readModelPositions(ctx, s.c.Config(i).DataDir, len(last))
			if err != nil {
				return err
			}
			if n := behindOf(last, pos); n > 0 {
				return fmt.Errorf("%d records behind", n)
			}
			return nil
		})
		out[i] = time.Since(t1)
		if err != nil {
			out[i] = -1
			s.env.Note("%s's read model did not catch up within %v: %v", s.c.ID(i), scaleCatchUpWithin, err)
		}
	}
	return out
}

// placementOf lists a run's placement, node by node: "n0 TAH_EVT_0 TAH_IN;
// n1 ...".
func placementOf(r *ScaleRun) string {
	var out []string
	for _, nd := range r.NodeStats {
		short := make([]string, len(nd.Streams))
		for i, st := range nd.Streams {
			short[i] = strings.TrimPrefix(st, "TAH_EVT_")
		}
		if len(short) == 0 {
			short = []string{"none"}
		}
		out = append(out, nd.ID+": "+strings.Join(short, ","))
	}
	return strings.Join(out, "; ")
}
