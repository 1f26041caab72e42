package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/telemetry/otlp"
)

// StepResult is rows 1 and 2 under one durability setting: one session, turns
// of ToolSteps tool calls and a final answer, the mock answering at once, the
// noop tool; and the floors of the very records those turns wrote.
type StepResult struct {
	Durability string        `json:"durability"`
	Sync       time.Duration `json:"sync_interval_ns"` // bus.Config.SyncInterval: 0 fsyncs every write
	ToolSteps  int           `json:"tool_steps"`
	LLMCalls   int           `json:"llm_calls_per_turn"`
	Turns      int           `json:"turns_measured"`

	// TAH, per LLM step (the turn's time divided by its LLM calls; median of
	// the turns): from client.Run (which subscribes to what the input
	// causes, then publishes it) to the client having the outcome.
	PerStep time.Duration `json:"per_step_ns"`
	// ClientRun is how long client.Run took, median: the client's
	// subscriptions and the input's publish, acknowledged once stored.
	ClientRun time.Duration `json:"client_run_ns,omitempty"`
	// ProviderPerStep is the time spent inside the mock (not TAH's).
	ProviderPerStep time.Duration `json:"provider_per_step_ns"`
	// CaughtUpPerStep is the same until the read model had applied the turn.
	CaughtUpPerStep time.Duration `json:"caught_up_per_step_ns"`
	// CPUPerStep is the CPU time (user + system) of this whole process, the
	// node with its loop, projector and embedded server (and the client),
	// from client.Run until the read model had applied the turn, over its
	// LLM calls: median of the turns.
	CPUPerStep time.Duration `json:"cpu_per_step_ns"`
	// AllocsPerStep and AllocBytesPerStep are the heap allocations (objects
	// and bytes, runtime/metrics) of this whole process over the same span,
	// over its LLM calls: median of the turns. What is allocated is also
	// copied into and collected again, so they are the step's copying work
	// as much as its garbage.
	AllocsPerStep     float64 `json:"allocs_per_step"`
	AllocBytesPerStep float64 `json:"alloc_bytes_per_step"`
	// StepGapP50 is the median time from one LLM call to the next (the
	// middle of the turn), and StepGapFloorP50 the median of the records
	// appended between two calls, appended again as they were written.
	StepGapP50      time.Duration `json:"step_gap_p50_ns"`
	StepGapFloorP50 time.Duration `json:"step_gap_floor_p50_ns"`
	StepGapRatioP50 float64       `json:"step_gap_ratio_p50"`
	// OwnEarly and OwnLate are TAH's own time between two LLM calls (the
	// gap less its records' floor and the mock's time), median of the first
	// and of the last 20 steps of the turn: the history grows in between.
	OwnEarly time.Duration `json:"own_early_ns"`
	OwnLate  time.Duration `json:"own_late_ns"`
	// TurnStart is from client.Run to the first LLM call; TurnEnd from the
	// last answer to the client having the outcome (agent.finished, the
	// checkpoint).
	TurnStart time.Duration `json:"turn_start_ns"`
	TurnEnd   time.Duration `json:"turn_end_ns"`

	// What one tool step in the middle of the turn writes: its events, in
	// how many records (durable writes), and each record's types.
	EventsPerStep  float64  `json:"events_per_step"`
	RecordsPerStep float64  `json:"records_per_step"`
	StepRecords    []string `json:"step_records"`
	// Sizes of record bodies: a record of one event (mean over a step's
	// events), a record of a whole step's events (mean), a record of
	// llm.started alone (smallest and largest of the turn: flat, since it
	// holds the request by reference), the checkpoint.
	EventBytesMean      int `json:"event_bytes_mean"`
	StepRecordBytesMean int `json:"step_record_bytes_mean"`
	LLMStartedBytesMin  int `json:"llm_started_bytes_min"`
	LLMStartedBytesMax  int `json:"llm_started_bytes_max"`
	CheckpointBytes     int `json:"checkpoint_bytes"`

	// Floors (row 1), fenced appends on the same node right after each turn.
	// StepRecordP50 is the physical floor of a step: one record holding all
	// of one step's events, one durable write of its bytes.
	StepRecordP50  time.Duration `json:"step_record_p50_ns"`
	StepRecordRate float64       `json:"step_record_per_s"`
	// StepRecordCPU is the CPU floor of a step: this process's CPU (user +
	// system) per such append, the client's and the embedded server's with
	// the read model paused (median of the turns). It is what NATS costs
	// for the one write a step cannot avoid, measured in isolation on the
	// same machine; CPURatio is CPUPerStep over it.
	StepRecordCPU time.Duration `json:"step_record_cpu_ns,omitempty"`
	CPURatio      float64       `json:"cpu_ratio,omitempty"`
	// OneEventP50 is a record of one event (each event of the steps alone).
	OneEventP50  time.Duration `json:"one_event_p50_ns"`
	OneEventRate float64       `json:"one_event_per_s"`
	// StepAppendsP50 is one step's records appended again as TAH wrote
	// them; FloorAppendPerStep the whole turn's records and its checkpoint
	// put, over its LLM calls.
	StepAppendsP50     time.Duration `json:"step_appends_p50_ns"`
	FloorAppendPerStep time.Duration `json:"floor_append_per_step_ns"`
	KVPut              time.Duration `json:"checkpoint_put_ns"`
	ApplyP50           time.Duration `json:"store_apply_step_p50_ns"` // store.Apply of one step's records
	ApplyRate          float64       `json:"store_apply_steps_per_s"`

	// Ratio is PerStep over StepRecordP50: a step against the one durable
	// write it cannot avoid. RatioWritten is PerStep over FloorAppendPerStep:
	// against the writes TAH chose to make.
	Ratio        float64 `json:"ratio"`
	RatioWritten float64 `json:"ratio_written"`
	// Overhead is TAH's own time per step: PerStep less the floor of its
	// writes and the mock's time.
	Overhead time.Duration `json:"overhead_per_step_ns"`

	// Tracing's cost, after the turns above: TracedTurns rounds (0: not
	// run) of a turn with tracing on and one with it off (the default),
	// each on the node started again (tracing is set at a node's start).
	// With tracing on every span is exported over OTLP/HTTP (protobuf) to
	// a receiver in this process that reads each export and keeps nothing,
	// the turn's spans flushed before its CPU is read. TracedCPUPerStep and
	// UntracedCPUPerStep are the two CPUs per step (medians), measured as
	// CPUPerStep; TracedCPURatio is the first over the second;
	// TracedOTLPBytesPerStep is what the exporter sent, over the turn's LLM
	// calls.
	TracedTurns            int           `json:"traced_turns,omitempty"`
	TracedPerStep          time.Duration `json:"traced_per_step_ns,omitempty"`
	TracedCPUPerStep       time.Duration `json:"traced_cpu_per_step_ns,omitempty"`
	UntracedPerStep        time.Duration `json:"untraced_per_step_ns,omitempty"`
	UntracedCPUPerStep     time.Duration `json:"untraced_cpu_per_step_ns,omitempty"`
	TracedCPURatio         float64       `json:"traced_cpu_ratio,omitempty"`
	TracedAllocsPerStep    float64       `json:"traced_allocs_per_step,omitempty"`
	UntracedAllocsPerStep  float64       `json:"untraced_allocs_per_step,omitempty"`
	TracedOTLPBytesPerStep float64       `json:"traced_otlp_bytes_per_step,omitempty"`
}

// stepScenario is rows 1 and 2 under one durability setting: one session,
// turns of many tool steps, each followed by its floor; then rounds of such
// turns with tracing on and off.
type stepScenario struct {
	cfg  Config
	sync time.Duration
	p    *probe
	st   *stack

	// rcv receives the traced turns' spans, traced is the nodes' tracing
	// then (its provider outlives the node's restarts), and flush, set
	// while tracing, exports the spans ended so far.
	rcv    *oteltest.Receiver
	traced *telemetry.Tracing
	flush  func(context.Context) error
}

func (s *stepScenario) Name() string {
	return fmt.Sprintf("rows 1-2: one session, turns of %d tool steps, %s", s.cfg.Steps, durabilityName(s.sync))
}

func (s *stepScenario) Setup(ctx context.Context, env Env) error {
	tool, final := scriptedMocks(0)
	s.p = newProbe(tool, final, true)
	// What a node's --tracing makes (telemetry/otlp), pointed at the
	// receiver whatever this process's OTEL_* variables say.
	s.rcv = oteltest.Discard(env.TB)
	tp, err := otlp.NewProvider(ctx, otlp.Config{Endpoint: s.rcv.HTTPURL}, otlp.Resource{ServiceName: "tah-bench"}, nil)
	if err != nil {
		return err
	}
	s.traced = telemetry.New(tp, false)
	s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: s.p})
	return err
}

func (s *stepScenario) Teardown(ctx context.Context) error {
	s.st.close()
	if s.traced != nil {
		return s.traced.Shutdown(ctx)
	}
	return nil
}

// Run measures each turn, then its floor right after (the disk's speed
// drifts), with the read model paused so that it does not project the
// floor's events too. The first turn and floor warm up and are not counted.
func (s *stepScenario) Run(ctx context.Context, rep *Report) error {
	acc := newStepAcc(s.cfg, s.sync)
	for i := range s.cfg.StepTurns + 1 {
		m, err := s.measureTurn(ctx, fmt.Sprintf("s_step%03d", i), i > 0, i == s.cfg.StepTurns)
		if err != nil {
			return err
		}
		f, err := s.floorOf(ctx, i, m)
		if err != nil {
			return err
		}
		if i > 0 {
			acc.add(m, f)
		}
	}
	if err := s.runTraced(ctx, acc); err != nil {
		return fmt.Errorf("the turns with tracing on and off: %w", err)
	}
	rep.Step = append(rep.Step, acc.result())
	return nil
}

// runTraced measures tracing's cost: rounds of two turns, one with tracing
// on and one with it off, each on the node started again with that tracing
// (a node takes its tracing at its start), so that the machine's drifts
// and the restarts fall on both alike; the turns above stay as they were
// measured before tracing existed. While tracing, each turn's spans are
// exported before its CPU is read, so that the export counts in the turn
// that made the spans. The first round warms up (the restarted node, the
// exporter's connection) and is not counted.
func (s *stepScenario) runTraced(ctx context.Context, acc *stepAcc) error {
	defer func() { s.flush = nil }()
	for i := range s.cfg.StepTurns + 1 {
		for _, on := range []bool{true, false} {
			s.st.o.session.Tracing, s.flush = nil, nil
			if on {
				s.st.o.session.Tracing, s.flush = s.traced, s.traced.ForceFlush
			}
			if err := s.st.restart(s.sync); err != nil {
				return err
			}
			// What the restart leaves to do (the read model's catch-up,
			// the stopped node's garbage) must not fall in the turn: in
			// trial runs it made a turn right after a restart cost more
			// CPU than one without, and would hide tracing's share.
			if err := s.st.waitReadModel(ctx); err != nil {
				return err
			}
			runtime.GC()
			sid := fmt.Sprintf("s_off%03d", i)
			if on {
				sid = fmt.Sprintf("s_on%03d", i)
			}
			_, before := s.rcv.Received()
			m, err := s.measureTurn(ctx, sid, false, false)
			if err != nil {
				return err
			}
			_, after := s.rcv.Received()
			if i > 0 {
				acc.addTraced(m, on, after-before)
			}
		}
	}
	if _, b := s.rcv.Received(); b == 0 {
		return errors.New("the receiver got no span")
	}
	return nil
}

// stepTurn is one measured turn of row 2.
type stepTurn struct {
	sid string
	// sent is when client.Run was called, stored when it returned, done
	// when the outcome came, caught when the read model had the turn.
	sent, stored, done, caught time.Time
	// cpu is the process's CPU time from client.Run to caught, allocs
	// what it allocated meanwhile.
	cpu    time.Duration
	allocs heapAllocs
	calls  []call
	all    []event.Event // the session's log
	start  int           // the index of the turn's turn.started in all
}

func (m stepTurn) events() []event.Event { return m.all[m.start:] }

// measureTurn creates session sid, runs a short first turn (it spawns the
// actor and claims the session, so that the measured turn is a session's
// ordinary next turn), then the measured turn. When Config.PhaseProfile
// asks for profiles, a counted turn's CPU profile goes to a file of its own
// (a turn holds a few dozen samples at the runtime's 100 Hz: a profile of
// the step is many turns' merged), and the last one's to the file without a
// number, with its heap profile beside it. While tracing, the spans are
// exported before the CPU count starts and again before it ends.
func (s *stepScenario) measureTurn(ctx context.Context, sid string, counted, final bool) (stepTurn, error) {
	st := s.st
	var resumeRM func(bool) error
	if s.cfg.PauseReadModel {
		resumeRM = st.pauseProjector(ctx)
	}
	m := stepTurn{sid: sid}
	if err := st.create(ctx, m.sid); err != nil {
		return m, err
	}
	_, first, err := st.run(ctx, m.sid, input(m.sid, 1))
	if err != nil {
		return m, err
	}
	s.p.take(m.sid)
	var stopProfile func()
	if s.flush != nil {
		if err := s.flush(ctx); err != nil {
			return m, fmt.Errorf("export the spans: %w", err)
		}
	}
	if s.cfg.PhaseProfile != "" && counted {
		path := fmt.Sprintf("%s.row2-%s", s.cfg.PhaseProfile, s.sync)
		if !final {
			stopProfile = profilePhase(path+"."+sid, s.cfg.PhaseBlocking)
		} else {
			stopAllocs := allocsPhase(path + ".allocs") // its first write out of the CPU profile
			stopCPU := profilePhase(path, s.cfg.PhaseBlocking)
			stopProfile = func() { stopCPU(); stopAllocs() }
		}
	}
	cpu0, allocs0 := cpuTime(), readHeapAllocs()
	t, o, err := st.run(ctx, m.sid, input(m.sid, s.cfg.Steps))
	if err != nil {
		return m, err
	}
	m.sent, m.stored, m.done = t.sent, t.stored, o.at
	if resumeRM != nil {
		if err := resumeRM(false); err != nil {
			return m, err
		}
	}
	// The turn's checkpoint is written after its outcome: its cost is the
	// turn's, so the count goes on until it is in the log.
	if s.cfg.Steps >= checkpointedSteps {
		if err := awaitAfter(ctx, st, m.sid, o.LastSeq); err != nil {
			return m, err
		}
	}
	last, err := st.node().Bus().LastSeq(ctx, m.sid)
	if err != nil {
		return m, err
	}
	if err := st.node().WaitReadModel(ctx, m.sid, last); err != nil {
		return m, err
	}
	m.caught = time.Now()
	if s.flush != nil {
		if err := s.flush(ctx); err != nil {
			return m, fmt.Errorf("export the spans: %w", err)
		}
	}
	m.cpu = cpuTime() - cpu0
	m.allocs = readHeapAllocs().sub(allocs0)
	if stopProfile != nil {
		stopProfile()
	}
	m.calls = s.p.take(m.sid)
	slices.SortFunc(m.calls, func(a, b call) int { return a.start.Compare(b.start) })
	if o.Steps != s.cfg.Steps+1 || len(m.calls) != s.cfg.Steps+1 {
		return m, fmt.Errorf("step turn of %s: %d steps, %d calls, want %d", m.sid, o.Steps, len(m.calls), s.cfg.Steps+1)
	}
	if m.all, err = readLog(ctx, st.cl, m.sid, 0); err != nil {
		return m, err
	}
	m.start = slices.IndexFunc(m.all, func(e event.Event) bool { return e.Seq > first.LastSeq && e.Type == event.TurnStarted })
	if m.start < 0 {
		return m, fmt.Errorf("step turn of %s: no turn.started in the log", m.sid)
	}
	return m, nil
}

// stepFloor is a measured turn's floors: its records appended again as
// they were written, each full tool step's events as one record and each
// of them as a record of its own, its checkpoint put again, each step's
// records applied to a fresh store.
type stepFloor struct {
	recs     [][]event.Event // the turn's records, as written
	appends  sample          // one per record of recs
	groups   []span          // the steps' records
	steps    []span          // the full tool steps among groups
	stepRecs sample          // one per full tool step: its events in one record
	// stepRecsCPU is the process's CPU per append of stepRecs (the client's
	// and the embedded server's, the read model paused).
	stepRecsCPU time.Duration
	oneEvent    sample // one per event of the full tool steps
	kvPut       time.Duration
	applies     sample // one per group
	// checkpoint is the checkpoint's size.
	checkpoint int
}

// floorOf measures turn m's floors as sessions f_step<i> (the records as
// written), g_step<i> (a step a record) and h_step<i> (an event a record),
// with the read model paused.
func (s *stepScenario) floorOf(ctx context.Context, i int, m stepTurn) (stepFloor, error) {
	f := stepFloor{recs: records(m.events())}
	f.groups = stepGroups(f.recs)
	var whole, single [][]event.Event
	for _, g := range f.groups {
		evs := flatten(f.recs[g.from:g.to])
		if !fullToolStep(evs) {
			continue
		}
		f.steps = append(f.steps, g)
		whole = append(whole, evs)
		for _, e := range evs {
			single = append(single, []event.Event{e})
		}
	}
	b := s.st.node().Bus()
	resume := s.st.pauseProjector(ctx)
	fsid := fmt.Sprintf("f_step%03d", i)
	var err error
	if f.appends, err = appendRecords(ctx, b, fsid, f.recs); err != nil {
		return f, err
	}
	cpu0 := cpuTime()
	if f.stepRecs, err = appendRecords(ctx, b, fmt.Sprintf("g_step%03d", i), whole); err != nil {
		return f, err
	}
	if len(whole) > 0 {
		f.stepRecsCPU = (cpuTime() - cpu0) / time.Duration(len(whole))
	}
	if f.oneEvent, err = appendRecords(ctx, b, fmt.Sprintf("h_step%03d", i), single); err != nil {
		return f, err
	}
	if f.checkpoint, f.kvPut, err = putCheckpointAgain(ctx, b.Checkpoints(), m.sid, fsid); err != nil {
		return f, err
	}
	db := filepath.Join(s.st.c.Layout().Dir, fmt.Sprintf("floor-%d.db", i))
	applied := make([][]event.Event, len(f.groups))
	for j, g := range f.groups {
		applied[j] = flatten(f.recs[g.from:g.to])
	}
	if f.applies, err = applyFloor(ctx, db, m.all[:m.start], applied); err != nil {
		return f, err
	}
	return f, resume(true)
}

// putCheckpointAgain puts session sid's checkpoint again as fsid's and
// returns its size and how long the put took. A short turn may have written
// no checkpoint (CheckpointEvery): then there is none to put.
func putCheckpointAgain(ctx context.Context, kv jetstream.KeyValue, sid, fsid string) (int, time.Duration, error) {
	entry, err := kv.Get(ctx, sid)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("checkpoint of %s: %w", sid, err)
	}
	t := time.Now()
	if _, err := kv.Put(ctx, fsid, entry.Value()); err != nil {
		return 0, 0, fmt.Errorf("checkpoint put of %s: %w", fsid, err)
	}
	return len(entry.Value()), time.Since(t), nil
}

func durabilityName(d time.Duration) string {
	if d == 0 {
		return "fsync always"
	}
	return "fsync every " + strings.TrimSuffix(d.String(), "0s")
}

// heapAllocs is what the process allocated on the heap so far (cumulative
// counts of runtime/metrics: they never go down, and need no stop of the
// world, unlike runtime.ReadMemStats).
type heapAllocs struct{ objects, bytes uint64 }

// heapAllocMetrics are the metrics readHeapAllocs reads.
var heapAllocMetrics = []string{"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes"}

func readHeapAllocs() heapAllocs {
	s := make([]metrics.Sample, len(heapAllocMetrics))
	for i, name := range heapAllocMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	var h heapAllocs
	if s[0].Value.Kind() == metrics.KindUint64 {
		h.objects = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		h.bytes = s[1].Value.Uint64()
	}
	return h
}

func (h heapAllocs) sub(o heapAllocs) heapAllocs {
	return heapAllocs{objects: h.objects - o.objects, bytes: h.bytes - o.bytes}
}

// allocsPhase writes the heap profile of what the process allocates until
// stop to path (go tool pprof -sample_index=alloc_space -base path.0 path),
// sampling every 32 KB allocated meanwhile, where the runtime's default
// (512 KB) would catch a few dozen samples of a turn (and a sample a few
// KB would add its own stacks to the turn's CPU profile). A diagnostic: a
// profile that cannot be written is not.
func allocsPhase(path string) (stop func()) {
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 32 << 10
	write := func(p string) {
		if f, err := os.Create(p); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	runtime.GC() // the heap profile is of the last completed cycle
	write(path + ".0")
	return func() {
		runtime.GC()
		write(path)
		runtime.MemProfileRate = rate
	}
}

// checkpointedSteps is the fewest steps of a measured turn that write a
// checkpoint after it: the session's own CheckpointEvery (64 events), a
// step writing 4 or more.
const checkpointedSteps = 16

// awaitAfter waits until session sid's log holds a record after seq (the
// checkpoint its turn writes after the outcome), reading where it ends.
func awaitAfter(ctx context.Context, st *stack, sid string, seq uint64) error {
	for {
		last, err := st.node().Bus().LastSeq(ctx, sid)
		if err != nil {
			return fmt.Errorf("the checkpoint of %s: %w", sid, err)
		}
		if last > seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the checkpoint of %s, after sequence %d: %w", sid, seq, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
