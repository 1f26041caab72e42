package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// ScaleResult is row 9 under one durability setting: the same appends, a
// step's records again and again from many sessions at once, on one node and
// on three (R3), the sessions spread over the log's shards and the nodes.
type ScaleResult struct {
	Durability string        `json:"durability"`
	Sync       time.Duration `json:"sync_interval_ns"` // bus.Config.SyncInterval: 0 fsyncs every write
	Sessions   int           `json:"sessions"`
	// Steps is how many steps each session appends, StepRecords the records
	// of one step (a tool step's records as row 2's turns write them) and
	// RecordBytes their mean size.
	Steps       int      `json:"steps_per_session"`
	StepRecords []string `json:"step_records"`
	RecordBytes int      `json:"record_bytes_mean"`
	Shards      int      `json:"log_shards"`
	One         ScaleRun `json:"one_node"`
	Three       ScaleRun `json:"three_nodes"`
	// Ratio is Three's appends/s over One's.
	Ratio float64 `json:"ratio"`
}

// ScaleRun is row 9's appends on one cluster.
type ScaleRun struct {
	Nodes    int           `json:"nodes"`
	Appends  int           `json:"appends"`
	Wall     time.Duration `json:"wall_ns"`
	PerSec   float64       `json:"appends_per_s"`
	CPUCores float64       `json:"cpu_cores_busy"`
	// ShardLeaders is how many of the log's shards each member's server
	// leads.
	ShardLeaders []int `json:"shard_leaders"`
}

// scaleScenario is row 9 under one durability setting.
type scaleScenario struct {
	cfg  Config
	sync time.Duration
	env  Env
	st   *stack
}

func (s *scaleScenario) Name() string {
	return fmt.Sprintf("row 9: appends of %d sessions, 3 nodes (R3) against 1, %s", s.cfg.ScaleSessions, durabilityName(s.sync))
}

func (s *scaleScenario) Setup(_ context.Context, env Env) error {
	s.env = env
	return nil
}

func (s *scaleScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

// Run takes a step's records from a real turn on one node, appends them
// there from every session at once, then does the same on three nodes.
func (s *scaleScenario) Run(ctx context.Context, rep *Report) error {
	res := &ScaleResult{Durability: durabilityName(s.sync), Sync: s.sync, Sessions: s.cfg.ScaleSessions, Steps: s.cfg.ScaleSteps}
	tool, final := scriptedMocks(0)
	var err error
	if s.st, err = startStack(s.env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: newProbe(tool, final, false)}); err != nil {
		return err
	}
	step, err := s.stepRecords(ctx)
	if err != nil {
		return err
	}
	for _, r := range step {
		res.StepRecords = append(res.StepRecords, recordName(r))
		res.RecordBytes += recordBytes(r) / len(step)
	}
	res.Shards = s.st.node().Bus().Shards()
	if res.One, err = s.appendAll(ctx, step); err != nil {
		return err
	}
	s.st.close()
	s.st.c.Stop(0)
	if s.st, err = startStack(s.env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: newProbe(tool, final, false), nodes: 3}); err != nil {
		return err
	}
	if res.Three, err = s.appendAll(ctx, step); err != nil {
		return err
	}
	res.Ratio = res.Three.PerSec / res.One.PerSec
	rep.Scale = append(rep.Scale, res)
	return nil
}

// stepRecords runs a turn of two tool steps and returns the records of its
// first full tool step.
func (s *scaleScenario) stepRecords(ctx context.Context) ([][]event.Event, error) {
	const sid = "s_scale_template"
	if err := s.st.create(ctx, sid); err != nil {
		return nil, err
	}
	if _, _, err := s.st.run(ctx, sid, input(sid, 2)); err != nil {
		return nil, err
	}
	evs, err := readLog(ctx, s.st.cl, sid, 0)
	if err != nil {
		return nil, err
	}
	recs := records(evs)
	for _, g := range stepGroups(recs) {
		if fullToolStep(flatten(recs[g.from:g.to])) {
			return recs[g.from:g.to], nil
		}
	}
	return nil, fmt.Errorf("row 9: the turn of %s has no full tool step", sid)
}

// appendAll appends step's records Steps times as each of Sessions sessions,
// all at once, session i through member i mod N's bus, and measures it.
func (s *scaleScenario) appendAll(ctx context.Context, step [][]event.Event) (ScaleRun, error) {
	n, c := s.cfg.ScaleSessions, s.st.c
	run := ScaleRun{Nodes: c.Size(), Appends: n * s.cfg.ScaleSteps * len(step)}
	work := make([][]event.Event, 0, s.cfg.ScaleSteps*len(step))
	for range s.cfg.ScaleSteps {
		work = append(work, step...)
	}
	buses := make([]*bus.Bus, c.Size())
	for i := range buses {
		buses[i] = c.Node(i).Bus()
	}
	shards := make([]string, buses[0].Shards())
	for k := range shards {
		shards[k] = wire.EventShardStream(k)
	}
	c.WaitLeaders(shards...)
	cpu0, t0 := cpuTime(), time.Now()
	err := parallel(ctx, n, n, func(i int) error {
		_, err := appendRecords(ctx, buses[i%len(buses)], fmt.Sprintf("s_scale%05d", i), work)
		return err
	})
	run.Wall = time.Since(t0)
	run.CPUCores = float64(cpuTime()-cpu0) / float64(run.Wall)
	if err != nil {
		return run, fmt.Errorf("%d node(s): %w", c.Size(), err)
	}
	run.PerSec = perSec(run.Appends, run.Wall)
	run.ShardLeaders = make([]int, c.Size())
	for _, name := range shards {
		if l := c.StreamLeader(name); l >= 0 {
			run.ShardLeaders[l]++
		}
	}
	return run, nil
}

// leadersOf says how many shards each member leads.
func leadersOf(counts []int) string {
	var out []string
	for i, n := range counts {
		out = append(out, fmt.Sprintf("n%d %d", i, n))
	}
	return strings.Join(out, ", ")
}
