package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// LoadResult is row 3 under one durability setting: Sessions sessions run
// turns of StepsPerTurn LLM steps at once, the mock answering each call after
// LLMDelay.
type LoadResult struct {
	Durability   string        `json:"durability"`
	Sessions     int           `json:"sessions"`
	StepsPerTurn int           `json:"steps_per_turn"`
	Turns        int           `json:"turns_per_session"`
	LLMDelay     time.Duration `json:"llm_delay_ns"`

	Steps int `json:"steps"`
	// CPUCores is the process's CPU time during the measured turns over
	// their wall time: how many cores the node and its server kept busy.
	CPUCores float64 `json:"cpu_cores_busy"`
	// ReadModelBehind is how many events the read model had still to apply
	// when the last outcome arrived.
	ReadModelBehind int           `json:"read_model_behind_events"`
	Wall            time.Duration `json:"wall_ns"`
	StepsPerSec     float64       `json:"steps_per_s"`
	// IdealUnbounded is every session waiting only for its model: the steps
	// over Turns × StepsPerTurn × LLMDelay, plus the spread of the sessions'
	// starts (Stagger: session i starts i/Sessions of an LLMDelay late, so
	// that they do not write in lockstep). FloorStepsPerSec is what the same
	// events allow as raw fenced appends from Sessions writers at once (with
	// the checkpoint puts); Ideal is the lower of the two.
	Stagger          time.Duration `json:"stagger_ns"`
	IdealUnbounded   float64       `json:"ideal_unbounded_steps_per_s"`
	FloorBefore      time.Duration `json:"floor_before_wall_ns"`
	FloorAfter       time.Duration `json:"floor_after_wall_ns"`
	FloorWall        time.Duration `json:"floor_wall_ns"`
	FloorStepsPerSec float64       `json:"floor_steps_per_s"`
	Ideal            float64       `json:"ideal_steps_per_s"`
	OfIdeal          float64       `json:"of_ideal"`

	// Added latency of a step: its time less the model's, within a turn
	// (from one LLM call to the next), and at a turn's start (input published
	// to the first LLM call) and end (the last answer to the outcome).
	AddedP50      time.Duration `json:"added_per_step_p50_ns"`
	AddedP99      time.Duration `json:"added_per_step_p99_ns"`
	TurnStartP50  time.Duration `json:"turn_start_p50_ns"`
	TurnStartP99  time.Duration `json:"turn_start_p99_ns"`
	TurnEndP50    time.Duration `json:"turn_end_p50_ns"`
	TurnEndP99    time.Duration `json:"turn_end_p99_ns"`
	TurnAddedP50  time.Duration `json:"turn_added_p50_ns"` // a turn's time less its model time
	TurnAddedP99  time.Duration `json:"turn_added_p99_ns"`
	EventsPerTurn int           `json:"events_per_turn"`
	// Between is where the added latency goes: the median time from one
	// event's creation to the next one's in the measured turns, by pair of
	// types (an event's time is taken just before its append).
	Between map[string]time.Duration `json:"between_events_p50_ns"`
}

// benchLoad measures row 3 on a fresh node.
func benchLoad(ctx context.Context, cfg config, syncEvery time.Duration) (*LoadResult, error) {
	tool, final := scriptedMocks(cfg.loadDelay)
	p := newProbe(tool, final, true)
	st, err := startStack(ctx, stackOpts{tmp: cfg.tmp, sync: syncEvery, provider: p})
	if err != nil {
		return nil, err
	}
	defer st.close(ctx, true)
	n, steps := cfg.loadSessions, cfg.loadSteps
	res := &LoadResult{Durability: durabilityName(syncEvery), Sessions: n, StepsPerTurn: steps, Turns: cfg.loadTurns, LLMDelay: cfg.loadDelay}
	sid := func(i int) string { return fmt.Sprintf("s_load%05d", i) }
	if err := parallel(ctx, n, 32, func(i int) error { return st.create(ctx, sid(i)) }); err != nil {
		return nil, err
	}
	// The floor before: one session's first turn is the template of every
	// session's turn (they are all alike: same script, same history), appended
	// again from n writers at once, each followed by the checkpoint put, with
	// the read model paused. (The disk's speed drifts: the floor is measured
	// before and after the measured turns, and averaged.)
	if _, err := st.run(ctx, sid(0), input(sid(0), steps-1)); err != nil {
		return nil, err
	}
	tmpl, err := lastTurns(ctx, st, 1, sid, []uint64{0})
	if err != nil {
		return nil, err
	}
	warm := make([]turnEvents, n)
	for i := range warm {
		warm[i] = tmpl[0]
	}
	if res.FloorBefore, err = loadFloor(ctx, st, warm, "f_loda", false); err != nil {
		return nil, err
	}
	// A short warm-up turn (one LLM call) spawns and claims every other
	// session; the read model catches up meanwhile, and is waited for.
	if err := parallel(ctx, n-1, n, func(i int) error {
		_, err := st.run(ctx, sid(i+1), input(sid(i+1), 0))
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := st.waitReadModel(ctx); err != nil {
		return nil, err
	}
	before := make([]uint64, n)
	for i := range n {
		var err error
		if before[i], err = st.n.Bus.LastSeq(ctx, sid(i)); err != nil {
			return nil, err
		}
	}
	p.reset()

	if cfg.pauseReadModel {
		resume := st.pauseProjector(ctx)
		defer func() { _ = resume(false) }()
	}
	type turn struct {
		sent time.Time
		done time.Time
	}
	turns := make([][]turn, n)
	var mu sync.Mutex
	stopProfile := cfg.profilePhase()
	cpu0 := cpuTime()
	t0 := time.Now()
	if err := parallel(ctx, n, n, func(i int) error {
		var mine []turn
		select {
		case <-time.After(time.Duration(i) * cfg.loadDelay / time.Duration(n)):
		case <-ctx.Done():
			return ctx.Err()
		}
		for range cfg.loadTurns {
			sent := time.Now()
			r, err := st.runAt(ctx, sid(i), input(sid(i), steps-1))
			if err != nil {
				return err
			}
			mine = append(mine, turn{sent: sent, done: r.at})
		}
		mu.Lock()
		turns[i] = mine
		mu.Unlock()
		return nil
	}); err != nil {
		return nil, err
	}
	res.Wall = time.Since(t0)
	res.CPUCores = float64(cpuTime()-cpu0) / float64(res.Wall)
	stopProfile()
	// How far behind the read model is when the last turn ends.
	info, err := st.n.Bus.JetStream().Stream(ctx, wire.EventStream)
	if err != nil {
		return nil, err
	}
	if last, pos := info.CachedInfo().State.LastSeq, st.n.Projector.Position(); !cfg.pauseReadModel && last > pos {
		res.ReadModelBehind = int(last - pos)
	}
	res.Steps = n * steps * cfg.loadTurns
	res.StepsPerSec = perSec(res.Steps, res.Wall)
	res.Stagger = time.Duration(n-1) * cfg.loadDelay / time.Duration(n)
	res.IdealUnbounded = perSec(res.Steps, res.Stagger+time.Duration(cfg.loadTurns*steps)*cfg.loadDelay)

	var added, starts, ends, turnAdded sample
	for i := range n {
		calls := p.take(sid(i))
		if len(calls) != steps*cfg.loadTurns {
			return nil, fmt.Errorf("%s: %d LLM calls, want %d", sid(i), len(calls), steps*cfg.loadTurns)
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
			ends = append(ends, tr.done.Sub(cs[len(cs)-1].end))
			turnAdded = append(turnAdded, tr.done.Sub(tr.sent)-model)
		}
	}
	res.AddedP50, res.AddedP99 = added.p50(), added.p99()
	res.TurnStartP50, res.TurnStartP99 = starts.p50(), starts.p99()
	res.TurnEndP50, res.TurnEndP99 = ends.p50(), ends.p99()
	res.TurnAddedP50, res.TurnAddedP99 = turnAdded.p50(), turnAdded.p99()

	// The floor after: every session's last turn again.
	after, err := lastTurns(ctx, st, n, sid, before)
	if err != nil {
		return nil, err
	}
	res.EventsPerTurn = len(after[0].evs)
	between := map[string]sample{}
	for i := range n {
		evs := after[i].evs
		for j := 1; j < len(evs); j++ {
			k := string(evs[j-1].Type) + " → " + string(evs[j].Type)
			between[k] = append(between[k], evs[j].Time.Sub(evs[j-1].Time))
		}
	}
	res.Between = map[string]time.Duration{}
	for k, v := range between {
		res.Between[k] = v.p50()
	}
	if res.FloorAfter, err = loadFloor(ctx, st, after, "f_lodb", true); err != nil {
		return nil, err
	}
	res.FloorWall = (res.FloorBefore + res.FloorAfter) / 2
	res.FloorStepsPerSec = perSec(n*steps, res.FloorWall)
	res.Ideal = min(res.IdealUnbounded, res.FloorStepsPerSec)
	res.OfIdeal = res.StepsPerSec / res.Ideal
	return res, nil
}

// turnEvents are the events of one turn of a session and its checkpoint.
type turnEvents struct {
	evs        []event.Event
	checkpoint []byte
}

// lastTurns returns the last turn (from its turn.started) after sequence
// from[i] of each session sid(i), with the session's checkpoint.
func lastTurns(ctx context.Context, st *stack, n int, sid func(int) string, from []uint64) ([]turnEvents, error) {
	out := make([]turnEvents, n)
	for i := range n {
		evs, _, err := st.n.Bus.Replay(ctx, sid(i), from[i]+1)
		if err != nil {
			return nil, err
		}
		for j := len(evs) - 1; j >= 0; j-- {
			if evs[j].Type == event.TurnStarted {
				out[i].evs = evs[j:]
				break
			}
		}
		if out[i].evs == nil {
			return nil, fmt.Errorf("%s: no turn after sequence %d", sid(i), from[i])
		}
		// Short turns share a checkpoint (session.Config.CheckpointEvery): the
		// floor puts one only for a session that has one.
		e, err := st.n.Bus.Checkpoints().Get(ctx, sid(i))
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

// loadFloor appends turns[i] again as session <prefix><i> from one writer
// per session, all at once, each followed by its checkpoint put, with the
// read model paused, and returns the time it took. With last, the read model
// stays paused (the node is about to stop).
func loadFloor(ctx context.Context, st *stack, turns []turnEvents, prefix string, last bool) (time.Duration, error) {
	resume := st.pauseProjector(ctx)
	kv := st.n.Bus.Checkpoints()
	t0 := time.Now()
	err := parallel(ctx, len(turns), len(turns), func(i int) error {
		fsid := fmt.Sprintf("%s%05d", prefix, i)
		if _, err := appendRaw(ctx, st.n.Bus, fsid, turns[i].evs); err != nil {
			return err
		}
		if turns[i].checkpoint == nil {
			return nil
		}
		_, err := kv.Put(ctx, fsid, turns[i].checkpoint)
		return err
	})
	took := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("load floor: %w", err)
	}
	if last {
		return took, nil
	}
	return took, resume(false)
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
