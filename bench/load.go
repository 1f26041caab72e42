package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
)

// LoadResult is row 3 under one durability setting: Sessions sessions run
// turns of StepsPerTurn LLM steps at once, the mock answering each call after
// LLMDelay.
type LoadResult struct {
	Durability   string        `json:"durability"`
	Sync         time.Duration `json:"sync_interval_ns"` // bus.Config.SyncInterval: 0 fsyncs every write
	Sessions     int           `json:"sessions"`
	StepsPerTurn int           `json:"steps_per_turn"`
	Turns        int           `json:"turns_per_session"`
	LLMDelay     time.Duration `json:"llm_delay_ns"`

	Steps int `json:"steps"`
	// CPUCores is the process's CPU time during the measured turns over
	// their wall time: how many cores the node and its server kept busy.
	CPUCores float64 `json:"cpu_cores_busy"`
	// ReadModelBehind is how many records the read model had still to apply
	// when the last outcome arrived, and ReadModelCatchUp how long it took
	// then to apply them: how far behind the log it ran.
	ReadModelBehind  int           `json:"read_model_behind_records"`
	ReadModelCatchUp time.Duration `json:"read_model_catch_up_ns"`
	Wall             time.Duration `json:"wall_ns"`
	StepsPerSec      float64       `json:"steps_per_s"`
	// ModelBound is every session waiting only for its model: the steps
	// over Turns × StepsPerTurn × LLMDelay, plus the spread of the sessions'
	// starts (Stagger: session i starts i/Sessions of an LLMDelay late, so
	// that they do not write in lockstep).
	Stagger    time.Duration `json:"stagger_ns"`
	ModelBound float64       `json:"model_bound_steps_per_s"`
	// The disk's bound, measured in the same run before and after the turns:
	// the turns written again by Sessions writers at once, the read model
	// paused (loadFloor: each its input stored, its records appended, its
	// checkpoint put, its input removed). DiskWritesPerSec is the fsynced
	// writes per second that reached; WritesPerStep TAH's durable writes per
	// step (a turn's input's store and removal, its records and checkpoint
	// puts, over its steps); DiskBound the first over the second.
	FloorBefore      time.Duration `json:"floor_before_wall_ns"`
	FloorAfter       time.Duration `json:"floor_after_wall_ns"`
	FloorWall        time.Duration `json:"floor_wall_ns"`
	DiskWritesPerSec float64       `json:"disk_writes_per_s"`
	WritesPerStep    float64       `json:"writes_per_step"`
	DiskBound        float64       `json:"disk_bound_steps_per_s"`
	// OfModel and OfDisk are StepsPerSec over ModelBound and DiskBound.
	OfModel float64 `json:"of_model_bound"`
	OfDisk  float64 `json:"of_disk_bound"`

	// Added latency of a step: its time less the model's, within a turn
	// (from one LLM call to the next), and at a turn's start (input published
	// to the first LLM call) and end (the last answer to the outcome).
	AddedP50     time.Duration `json:"added_per_step_p50_ns"`
	AddedP99     time.Duration `json:"added_per_step_p99_ns"`
	TurnStartP50 time.Duration `json:"turn_start_p50_ns"`
	TurnStartP99 time.Duration `json:"turn_start_p99_ns"`
	TurnEndP50   time.Duration `json:"turn_end_p50_ns"`
	TurnEndP99   time.Duration `json:"turn_end_p99_ns"`
	TurnAddedP50 time.Duration `json:"turn_added_p50_ns"` // a turn's time less its model time
	TurnAddedP99 time.Duration `json:"turn_added_p99_ns"`
	// ClientRunP50 and P99 are how long client.Run took, within the turn's
	// start: the client's subscriptions, its consumer of the session's log,
	// and the input's publish.
	ClientRunP50 time.Duration `json:"client_run_p50_ns,omitempty"`
	ClientRunP99 time.Duration `json:"client_run_p99_ns,omitempty"`
	// TakenP50 and P99 are, within the turn's start, from the input stored
	// (client.Run returned) to its node taking it: the time of the turn's
	// turn.started, which the node stages as soon as the input reaches the
	// session (each session's last measured turn).
	TakenP50       time.Duration `json:"input_taken_p50_ns,omitempty"`
	TakenP99       time.Duration `json:"input_taken_p99_ns,omitempty"`
	EventsPerTurn  int           `json:"events_per_turn"`
	RecordsPerTurn int           `json:"records_per_turn"`
	// Between is where the added latency goes: the median time from one
	// record's creation to the next one's in the measured turns, by pair of
	// records (their events' types; a record's time is its first event's,
	// taken when the event is made).
	Between map[string]time.Duration `json:"between_records_p50_ns"`
}

// loadScenario is row 3 under one durability setting: many sessions
// taking turns at once, against the floor of their writes.
type loadScenario struct {
	cfg  Config
	sync time.Duration
	p    *probe
	st   *stack
	// before[i] is the stream sequence of session i's last event before
	// the measured turns.
	before []uint64
	// floorWrites are the durable writes of the floor before the turns.
	floorWrites int
	// lastStored[i] is when session i's last measured input was stored
	// (its client.Run returned), to set beside its turn.started's time.
	lastStored []time.Time
}

func (s *loadScenario) Name() string {
	c := s.cfg
	return fmt.Sprintf("row 3: %d sessions, %d steps a turn, the model answering after %v, %s", c.LoadSessions, c.LoadSteps, c.LoadDelay, durabilityName(s.sync))
}

func (s *loadScenario) sid(i int) string { return fmt.Sprintf("s_load%05d", i) }

// Setup starts the node and creates the sessions.
func (s *loadScenario) Setup(ctx context.Context, env Env) error {
	tool, final := scriptedMocks(s.cfg.LoadDelay)
	s.p = newProbe(tool, final, true)
	var err error
	if s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: s.p}); err != nil {
		return err
	}
	return parallel(ctx, s.cfg.LoadSessions, 32, func(i int) error { return s.st.create(ctx, s.sid(i)) })
}

func (s *loadScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

// loadTurn is one measured turn of a session: when client.Run was called
// and returned, and when the outcome came.
type loadTurn struct{ sent, stored, done time.Time }

func (s *loadScenario) Run(ctx context.Context, rep *Report) error {
	c, n := s.cfg, s.cfg.LoadSessions
	res := &LoadResult{Durability: durabilityName(s.sync), Sync: s.sync, Sessions: n, StepsPerTurn: c.LoadSteps, Turns: c.LoadTurns, LLMDelay: c.LoadDelay}
	if err := s.floorBefore(ctx, res); err != nil {
		return err
	}
	if err := s.warmUp(ctx); err != nil {
		return err
	}
	turns, err := s.measure(ctx, res)
	if err != nil {
		return err
	}
	if err := s.latencies(res, turns); err != nil {
		return err
	}
	if err := s.floorAfter(ctx, res); err != nil {
		return err
	}
	rep.Load = append(rep.Load, res)
	return nil
}

// floorBefore measures the floor before the turns: one session's first
// turn is the template of every session's turn (they are all alike: same
// script, same history), appended again from n writers at once, each
// followed by the checkpoint put, with the read model paused. (The disk's
// speed drifts: the floor is measured before and after the measured turns,
// and averaged.)
func (s *loadScenario) floorBefore(ctx context.Context, res *LoadResult) error {
	n := s.cfg.LoadSessions
	s.before = make([]uint64, n)
	_, o, err := s.st.run(ctx, s.sid(0), input(s.sid(0), s.cfg.LoadSteps-1))
	if err != nil {
		return err
	}
	s.before[0] = o.LastSeq
	tmpl, err := s.lastTurns(ctx, 1, []uint64{0})
	if err != nil {
		return err
	}
	warm := make([]turnEvents, n)
	for i := range warm {
		warm[i] = tmpl[0]
	}
	res.FloorBefore, s.floorWrites, err = loadFloor(ctx, s.st, warm, "f_loda", false)
	return err
}

// warmUp runs a short turn (one LLM call) of every other session, which
// spawns and claims it; the read model catches up meanwhile, and is waited
// for.
func (s *loadScenario) warmUp(ctx context.Context) error {
	n := s.cfg.LoadSessions
	if err := parallel(ctx, n-1, n, func(i int) error {
		_, o, err := s.st.run(ctx, s.sid(i+1), input(s.sid(i+1), 0))
		s.before[i+1] = o.LastSeq
		return err
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := s.st.waitReadModel(ctx); err != nil {
		return err
	}
	s.p.reset()
	return nil
}

// measure runs the measured turns, session i starting i/n of an LLM call
// late, so that they do not write in lockstep.
func (s *loadScenario) measure(ctx context.Context, res *LoadResult) ([][]loadTurn, error) {
	c, n := s.cfg, s.cfg.LoadSessions
	if c.PauseReadModel {
		resume := s.st.pauseProjector(ctx)
		defer func() { _ = resume(false) }()
	}
	turns := make([][]loadTurn, n)
	stopProfile := profilePhase(c.PhaseProfile, c.PhaseBlocking)
	cpu0 := cpuTime()
	t0 := time.Now()
	err := parallel(ctx, n, n, func(i int) error {
		select {
		case <-time.After(time.Duration(i) * c.LoadDelay / time.Duration(n)):
		case <-ctx.Done():
			return ctx.Err()
		}
		for range c.LoadTurns {
			t, o, err := s.st.run(ctx, s.sid(i), input(s.sid(i), c.LoadSteps-1))
			if err != nil {
				return err
			}
			turns[i] = append(turns[i], loadTurn{sent: t.sent, stored: t.stored, done: o.at})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Wall = time.Since(t0)
	res.CPUCores = float64(cpuTime()-cpu0) / float64(res.Wall)
	stopProfile()
	if !c.PauseReadModel {
		if err := s.readModelLag(ctx, res); err != nil {
			return nil, err
		}
	}
	res.Steps = n * c.LoadSteps * c.LoadTurns
	res.StepsPerSec = perSec(res.Steps, res.Wall)
	res.Stagger = time.Duration(n-1) * c.LoadDelay / time.Duration(n)
	res.ModelBound = perSec(res.Steps, res.Stagger+time.Duration(c.LoadTurns*c.LoadSteps)*c.LoadDelay)
	res.OfModel = res.StepsPerSec / res.ModelBound
	return turns, nil
}

// readModelLag measures how far behind the log the read model is when the
// last outcome arrives: the records it has still to apply, and how long it
// takes to apply them.
func (s *loadScenario) readModelLag(ctx context.Context, res *LoadResult) error {
	t0 := time.Now()
	last, err := s.st.logState(ctx)
	if err != nil {
		return err
	}
	for k, pos := range s.st.node().ReadModelPositions() {
		if last.lastSeqs[k] > pos {
			res.ReadModelBehind += int(last.lastSeqs[k] - pos)
		}
	}
	if err := s.st.node().WaitReadModelLog(ctx, last.lastSeqs); err != nil {
		return fmt.Errorf("the read model catching up: %w", err)
	}
	res.ReadModelCatchUp = time.Since(t0)
	return nil
}

// latencies is where the measured turns' time went: each step's time less
// the model's, and the turns' starts and ends.
func (s *loadScenario) latencies(res *LoadResult, turns [][]loadTurn) error {
	steps := s.cfg.LoadSteps
	var added, starts, ends, turnAdded, runs sample
	s.lastStored = make([]time.Time, len(turns))
	for i := range s.cfg.LoadSessions {
		calls := s.p.take(s.sid(i))
		if len(calls) != steps*s.cfg.LoadTurns {
			return fmt.Errorf("%s: %d LLM calls, want %d", s.sid(i), len(calls), steps*s.cfg.LoadTurns)
		}
		slices.SortFunc(calls, func(a, b call) int { return a.start.Compare(b.start) })
		for t, tr := range turns[i] {
			cs := calls[t*steps : (t+1)*steps]
			var model time.Duration
			for k, c := range cs {
				model += c.end.Sub(c.start) - c.inTAH
				if k+1 < len(cs) {
					added = append(added, cs[k+1].start.Sub(c.start)-(c.end.Sub(c.start)-c.inTAH))
				}
			}
			starts = append(starts, cs[0].start.Sub(tr.sent))
			runs = append(runs, tr.stored.Sub(tr.sent))
			s.lastStored[i] = tr.stored
			ends = append(ends, tr.done.Sub(cs[len(cs)-1].end))
			turnAdded = append(turnAdded, tr.done.Sub(tr.sent)-model)
		}
	}
	res.AddedP50, res.AddedP99 = added.p50(), added.p99()
	res.TurnStartP50, res.TurnStartP99 = starts.p50(), starts.p99()
	res.TurnEndP50, res.TurnEndP99 = ends.p50(), ends.p99()
	res.TurnAddedP50, res.TurnAddedP99 = turnAdded.p50(), turnAdded.p99()
	res.ClientRunP50, res.ClientRunP99 = runs.p50(), runs.p99()
	return nil
}

// floorAfter measures the floor after the turns, every session's last turn
// appended again, and where the time between the turns' records went.
func (s *loadScenario) floorAfter(ctx context.Context, res *LoadResult) error {
	n := s.cfg.LoadSessions
	after, err := s.lastTurns(ctx, n, s.before)
	if err != nil {
		return err
	}
	res.RecordsPerTurn = len(after[0].recs)
	res.EventsPerTurn = len(flatten(after[0].recs))
	between := map[string]sample{}
	var taken sample
	for i := range n {
		recs := after[i].recs
		if i < len(s.lastStored) && !s.lastStored[i].IsZero() {
			taken = append(taken, recs[0][0].Time.Sub(s.lastStored[i]))
		}
		for j := 1; j < len(recs); j++ {
			k := recordName(recs[j-1]) + " → " + recordName(recs[j])
			between[k] = append(between[k], recs[j][0].Time.Sub(recs[j-1][0].Time))
		}
	}
	res.TakenP50, res.TakenP99 = taken.p50(), taken.p99()
	res.Between = map[string]time.Duration{}
	for k, v := range between {
		res.Between[k] = v.p50()
	}
	var writes int
	if res.FloorAfter, writes, err = loadFloor(ctx, s.st, after, "f_lodb", true); err != nil {
		return err
	}
	res.FloorWall = (res.FloorBefore + res.FloorAfter) / 2
	res.DiskWritesPerSec = perSec(s.floorWrites+writes, res.FloorBefore+res.FloorAfter)
	res.WritesPerStep = float64(writes) / float64(n*s.cfg.LoadSteps)
	res.DiskBound = res.DiskWritesPerSec / res.WritesPerStep
	res.OfDisk = res.StepsPerSec / res.DiskBound
	return nil
}

// turnEvents are the records of one turn of a session and its checkpoint.
type turnEvents struct {
	recs       [][]event.Event
	checkpoint []byte
}

// lastTurns returns the last turn (from its turn.started) after sequence
// from[i] of each of the first n sessions, read through the client, with
// the session's checkpoint.
func (s *loadScenario) lastTurns(ctx context.Context, n int, from []uint64) ([]turnEvents, error) {
	out := make([]turnEvents, n)
	for i := range n {
		sid := s.sid(i)
		evs, err := readLog(ctx, s.st.cl, sid, from[i]+1)
		if err != nil {
			return nil, err
		}
		for j := len(evs) - 1; j >= 0; j-- {
			if evs[j].Type == event.TurnStarted {
				out[i].recs = records(evs[j:])
				break
			}
		}
		if out[i].recs == nil {
			return nil, fmt.Errorf("%s: no turn after sequence %d", sid, from[i])
		}
		// Short turns share a checkpoint (session.Config.CheckpointEvery): the
		// floor puts one only for a session that has one.
		e, err := s.st.node().Bus().Checkpoints().Get(ctx, sid)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			out[i].checkpoint = e.Value()
		}
	}
	return out, nil
}

// loadFloor writes turns[i] again as session <prefix><i>, one writer per
// session, all at once, with the read model paused: the turn's input stored
// (floorInputs), its records appended, its checkpoint put, the input removed.
// It returns the time it took and the durable writes it made. With last, the read model stays paused (the node is about
// to stop).
func loadFloor(ctx context.Context, st *stack, turns []turnEvents, prefix string, last bool) (time.Duration, int, error) {
	resume := st.pauseProjector(ctx)
	b := st.node().Bus()
	kv := b.Checkpoints()
	inputs, err := floorInputs(ctx, b.JetStream())
	if err != nil {
		return 0, 0, fmt.Errorf("load floor: %w", err)
	}
	writes := 0
	for _, t := range turns {
		writes += inputWrites + len(t.recs)
		if t.checkpoint != nil {
			writes++
		}
	}
	t0 := time.Now()
	err = parallel(ctx, len(turns), len(turns), func(i int) error {
		fsid := fmt.Sprintf("%s%05d", prefix, i)
		seq, err := inputs.store(ctx, fsid, int64(b.MaxPayload()))
		if err != nil {
			return err
		}
		if _, err := appendRecords(ctx, b, fsid, turns[i].recs); err != nil {
			return err
		}
		if turns[i].checkpoint != nil {
			if _, err := kv.Put(ctx, fsid, turns[i].checkpoint); err != nil {
				return err
			}
		}
		return inputs.remove(ctx, seq)
	})
	took := time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("load floor: %w", err)
	}
	if last {
		return took, writes, nil
	}
	return took, writes, resume(false)
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
