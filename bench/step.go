package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
)

// StepResult is rows 1 and 2 under one durability setting: one session, turns
// of ToolSteps tool calls and a final answer, the mock answering at once, the
// noop tool; and the floor of the very events those turns wrote.
type StepResult struct {
	Durability string `json:"durability"`
	ToolSteps  int    `json:"tool_steps"`
	LLMCalls   int    `json:"llm_calls_per_turn"`
	Turns      int    `json:"turns_measured"`

	// TAH, per LLM step (the turn's time divided by its LLM calls; median of
	// the turns): from publishing the input to receiving the outcome.
	PerStep time.Duration `json:"per_step_ns"`
	// ProviderPerStep is the time spent inside the mock (not TAH's).
	ProviderPerStep time.Duration `json:"provider_per_step_ns"`
	// CaughtUpPerStep is the same until the read model had applied the turn.
	CaughtUpPerStep time.Duration `json:"caught_up_per_step_ns"`
	// StepGapP50 is the median time from one LLM call to the next (the
	// middle of the turn), and StepGapFloorP50 the median of the raw appends
	// of the events written between two calls.
	StepGapP50      time.Duration `json:"step_gap_p50_ns"`
	StepGapFloorP50 time.Duration `json:"step_gap_floor_p50_ns"`
	StepGapRatioP50 float64       `json:"step_gap_ratio_p50"`
	// OwnEarly and OwnLate are TAH's own time between two LLM calls (the
	// gap less its appends' floor and the mock's time), median of the first
	// and of the last 20 steps of the turn: the context grows in between.
	OwnEarly time.Duration `json:"own_early_ns"`
	OwnLate  time.Duration `json:"own_late_ns"`
	// TurnStart is from publishing the input to the first LLM call; TurnEnd
	// from the last answer to the outcome (agent.finished, the checkpoint).
	TurnStart time.Duration `json:"turn_start_ns"`
	TurnEnd   time.Duration `json:"turn_end_ns"`

	// What one step writes.
	EventsPerStep      float64  `json:"events_per_step"`
	StepTypes          []string `json:"step_types"`
	EventBytesMean     int      `json:"event_bytes_mean"`
	LLMStartedBytesMin int      `json:"llm_started_bytes_min"`
	LLMStartedBytesMax int      `json:"llm_started_bytes_max"`
	CheckpointBytes    int      `json:"checkpoint_bytes"`

	// Floors (row 1), the same events again as raw fenced appends.
	AppendP50          time.Duration `json:"append_p50_ns"`
	AppendRate         float64       `json:"append_per_s"`
	FloorAppendPerStep time.Duration `json:"floor_append_per_step_ns"` // the turn's appends and checkpoint put / LLM calls
	StepAppendsP50     time.Duration `json:"step_appends_p50_ns"`      // one step's appends (llm.started .. tool.finished)
	KVPut              time.Duration `json:"checkpoint_put_ns"`
	ApplyP50           time.Duration `json:"store_apply_step_p50_ns"` // store.Apply of one step's events
	ApplyRate          float64       `json:"store_apply_steps_per_s"`

	// Ratio is PerStep over FloorAppendPerStep; RatioOwn leaves the mock's
	// time out; RatioFull counts the read model's transaction in the floor.
	Ratio     float64 `json:"ratio"`
	RatioOwn  float64 `json:"ratio_own"`
	RatioFull float64 `json:"ratio_with_sqlite"`
	// Overhead is TAH's own time per step: PerStep less the floor of its
	// appends and the mock's time. The peer spends 1.39 ms.
	Overhead time.Duration `json:"overhead_per_step_ns"`
}

// benchStep measures rows 1 and 2 on a fresh node.
func benchStep(ctx context.Context, cfg config, syncEvery time.Duration) (*StepResult, error) {
	tool, final := scriptedMocks(0)
	p := newProbe(tool, final, true)
	st, err := startStack(ctx, stackOpts{tmp: cfg.tmp, sync: syncEvery, provider: p})
	if err != nil {
		return nil, err
	}
	defer st.close(ctx, true)
	b := st.n.Bus
	res := &StepResult{Durability: durabilityName(syncEvery), ToolSteps: cfg.steps, LLMCalls: cfg.steps + 1, Turns: cfg.stepTurns}
	var perStep, provider, caughtUp, floorStep, kvPuts []time.Duration
	var gaps, gapFloors, early, late, starts, ends sample
	var gapRatios []float64
	var appends, applies, stepAppends sample
	var bytes, nEvents, nSteps, stepEvents int
	res.LLMStartedBytesMin = 1 << 30

	// Each measured turn, then its floor right after (the disk's speed
	// drifts), with the read model paused so that it does not project the
	// floor's events too.
	type measured struct {
		elapsed, caught time.Duration
		at, t0          time.Time
		calls           []call
		all             []event.Event
		start           int
		sid             string
	}
	for rep := range cfg.stepTurns + 1 {
		var resumeRM func(bool) error
		if cfg.pauseReadModel {
			resumeRM = st.pauseProjector(ctx)
		}
		sid := fmt.Sprintf("s_step%03d", rep)
		if err := st.create(ctx, sid); err != nil {
			return nil, err
		}
		// A short first turn spawns the actor and claims the session, so that
		// the measured turn is a session's ordinary next turn.
		first, err := st.run(ctx, sid, input(sid, 1))
		if err != nil {
			return nil, err
		}
		p.take(sid)
		t0 := time.Now()
		r, err := st.runAt(ctx, sid, input(sid, cfg.steps))
		if err != nil {
			return nil, err
		}
		if resumeRM != nil {
			if err := resumeRM(false); err != nil {
				return nil, err
			}
		}
		last, err := b.LastSeq(ctx, sid)
		if err != nil {
			return nil, err
		}
		if err := st.n.Projector.WaitFor(ctx, last); err != nil {
			return nil, err
		}
		m := measured{elapsed: r.at.Sub(t0), caught: time.Since(t0), at: r.at, t0: t0, calls: p.take(sid), sid: sid}
		slices.SortFunc(m.calls, func(a, b call) int { return a.start.Compare(b.start) })
		if r.o.Steps != cfg.steps+1 || len(m.calls) != cfg.steps+1 {
			return nil, fmt.Errorf("step turn of %s: %d steps, %d calls, want %d", sid, r.o.Steps, len(m.calls), cfg.steps+1)
		}
		// The measured turn's events: from its turn.started to the end.
		if m.all, _, err = b.Replay(ctx, sid, 1); err != nil {
			return nil, err
		}
		m.start = -1
		for i, e := range m.all {
			if e.Seq > first.LastSeq && e.Type == event.TurnStarted {
				m.start = i
				break
			}
		}
		if m.start < 0 {
			return nil, fmt.Errorf("step turn of %s: no turn.started in the log", sid)
		}

		resume := st.pauseProjector(ctx)
		calls, elapsed, caught, turn := m.calls, m.elapsed, m.caught, m.all[m.start:]
		// The floor: the same events as raw appends, the checkpoint as a raw put.
		ap, err := appendRaw(ctx, b, fmt.Sprintf("f_step%03d", rep), turn)
		if err != nil {
			return nil, err
		}
		kv := b.Checkpoints()
		entry, err := kv.Get(ctx, m.sid)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of %s: %w", m.sid, err)
		}
		tk := time.Now()
		if _, err := kv.Put(ctx, fmt.Sprintf("f_step%03d", rep), entry.Value()); err != nil {
			return nil, err
		}
		kvPut := time.Since(tk)
		groups := stepGroups(turn)
		ay, err := applyFloor(ctx, filepath.Join(st.dir, fmt.Sprintf("floor-%d.db", rep)), m.all[:m.start], groups)
		if err != nil {
			return nil, err
		}
		if err := resume(true); err != nil {
			return nil, err
		}
		if rep == 0 {
			continue // the first turn and floor warm up and are not counted
		}

		perStep = append(perStep, elapsed/time.Duration(cfg.steps+1))
		caughtUp = append(caughtUp, caught/time.Duration(cfg.steps+1))
		floorStep = append(floorStep, (ap.sum()+kvPut)/time.Duration(cfg.steps+1))
		kvPuts = append(kvPuts, kvPut)
		var prov time.Duration
		for _, c := range calls {
			prov += c.end.Sub(c.start) - c.inTAH
		}
		provider = append(provider, prov/time.Duration(len(calls)))
		appends = append(appends, ap...)
		applies = append(applies, ay...)

		// Between two LLM calls: the events appended after call k began and
		// before call k+1 began, against the time between the two.
		iv := intervals(turn)
		for k := 1; k+1 < len(calls)-1; k++ { // the middle of the turn
			var fl time.Duration
			for _, i := range iv[k] {
				fl += ap[i]
			}
			gap := calls[k+1].start.Sub(calls[k].start)
			gaps = append(gaps, gap)
			gapFloors = append(gapFloors, fl)
			gapRatios = append(gapRatios, float64(gap)/float64(fl))
			own := gap - fl - (calls[k].end.Sub(calls[k].start) - calls[k].inTAH)
			switch {
			case k <= 20:
				early = append(early, own)
			case k >= len(calls)-22:
				late = append(late, own)
			}
		}
		starts = append(starts, calls[0].start.Sub(m.t0))
		ends = append(ends, m.at.Sub(calls[len(calls)-1].end))
		// One step's appends, llm.started to tool.finished.
		i := 0
		for _, g := range groups {
			var s time.Duration
			for range g {
				s += ap[i]
				i++
			}
			if g[0].Type == event.LLMStarted && g[len(g)-1].Type == event.ToolFinished {
				stepAppends = append(stepAppends, s)
				nSteps++
				stepEvents += len(g)
				if res.StepTypes == nil {
					for _, e := range g {
						res.StepTypes = append(res.StepTypes, string(e.Type))
					}
				}
			}
		}
		for _, e := range turn {
			body, _ := e.Marshal()
			bytes += len(body)
			nEvents++
			if e.Type == event.LLMStarted {
				res.LLMStartedBytesMin = min(res.LLMStartedBytesMin, len(body))
				res.LLMStartedBytesMax = max(res.LLMStartedBytesMax, len(body))
			}
		}
		res.CheckpointBytes = max(res.CheckpointBytes, len(entry.Value()))
	}
	res.PerStep = medianDur(perStep)
	res.ProviderPerStep = medianDur(provider)
	res.CaughtUpPerStep = medianDur(caughtUp)
	res.FloorAppendPerStep = medianDur(floorStep)
	res.KVPut = medianDur(kvPuts)
	res.StepGapP50, res.StepGapFloorP50, res.StepGapRatioP50 = gaps.p50(), gapFloors.p50(), median(gapRatios)
	res.OwnEarly, res.OwnLate = early.p50(), late.p50()
	res.TurnStart, res.TurnEnd = starts.p50(), ends.p50()
	res.AppendP50, res.AppendRate = appends.p50(), perSec(len(appends), appends.sum())
	res.StepAppendsP50 = stepAppends.p50()
	res.ApplyP50, res.ApplyRate = applies.p50(), perSec(len(applies), applies.sum())
	if nSteps > 0 {
		res.EventsPerStep = float64(stepEvents) / float64(nSteps)
	}
	if nEvents > 0 {
		res.EventBytesMean = bytes / nEvents
	}
	res.Ratio = float64(res.PerStep) / float64(res.FloorAppendPerStep)
	res.RatioOwn = float64(res.PerStep-res.ProviderPerStep) / float64(res.FloorAppendPerStep)
	res.RatioFull = float64(res.PerStep) / float64(res.FloorAppendPerStep+res.ApplyP50)
	res.Overhead = res.PerStep - res.ProviderPerStep - res.FloorAppendPerStep
	return res, nil
}

// stepGroups splits a turn's events into one group per LLM step, each from its
// llm.started to the event before the next llm.started (the first group also
// has turn.started, the last the end of the turn).
func stepGroups(turn []event.Event) [][]event.Event {
	var out [][]event.Event
	var cur []event.Event
	hasLLM := false
	for _, e := range turn {
		if e.Type == event.LLMStarted {
			if hasLLM {
				out = append(out, cur)
				cur = nil
			}
			hasLLM = true
		}
		cur = append(cur, e)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// intervals returns, for each LLM call k, the indexes of the events appended
// after call k began and before call k+1 began: the llm.streaming and what
// follows llm.started k, up to and with llm.started k+1.
func intervals(turn []event.Event) [][]int {
	var out [][]int
	k := -1
	for i, e := range turn {
		if e.Type == event.LLMStarted {
			if k >= 0 {
				out[k] = append(out[k], i)
			}
			k++
			out = append(out, nil)
			continue
		}
		if k >= 0 {
			out[k] = append(out[k], i)
		}
	}
	return out
}

func durabilityName(d time.Duration) string {
	if d == 0 {
		return "fsync always"
	}
	return "fsync every " + strings.TrimSuffix(d.String(), "0s")
}
