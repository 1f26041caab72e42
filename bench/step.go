package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	// TurnStart is from client.Run to the first LLM call; TurnEnd from the
	// last answer to the client having the outcome (agent.finished, the
	// checkpoint).
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

// stepScenario is rows 1 and 2 under one durability setting: one session,
// turns of many tool steps, each followed by its floor.
type stepScenario struct {
	cfg  Config
	sync time.Duration
	p    *probe
	st   *stack
}

func (s *stepScenario) Name() string {
	return fmt.Sprintf("rows 1-2: one session, turns of %d tool steps, %s", s.cfg.Steps, durabilityName(s.sync))
}

func (s *stepScenario) Setup(_ context.Context, env Env) error {
	tool, final := scriptedMocks(0)
	s.p = newProbe(tool, final, true)
	var err error
	s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: s.p})
	return err
}

func (s *stepScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

// Run measures each turn, then its floor right after (the disk's speed
// drifts), with the read model paused so that it does not project the
// floor's events too. The first turn and floor warm up and are not counted.
func (s *stepScenario) Run(ctx context.Context, rep *Report) error {
	acc := newStepAcc(s.cfg, s.sync)
	for i := range s.cfg.StepTurns + 1 {
		m, err := s.measureTurn(ctx, i)
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
	rep.Step = append(rep.Step, acc.result())
	return nil
}

// stepTurn is one measured turn of row 2.
type stepTurn struct {
	sid string
	// sent is when client.Run was called, stored when it returned, done
	// when the outcome came, caught when the read model had the turn.
	sent, stored, done, caught time.Time
	calls                      []call
	all                        []event.Event // the session's log
	start                      int           // the index of the turn's turn.started in all
}

func (m stepTurn) events() []event.Event { return m.all[m.start:] }

// measureTurn creates session number i, runs a short first turn (it spawns
// the actor and claims the session, so that the measured turn is a
// session's ordinary next turn), then the measured turn.
func (s *stepScenario) measureTurn(ctx context.Context, i int) (stepTurn, error) {
	st := s.st
	var resumeRM func(bool) error
	if s.cfg.PauseReadModel {
		resumeRM = st.pauseProjector(ctx)
	}
	m := stepTurn{sid: fmt.Sprintf("s_step%03d", i)}
	if err := st.create(ctx, m.sid); err != nil {
		return m, err
	}
	_, first, err := st.run(ctx, m.sid, input(m.sid, 1))
	if err != nil {
		return m, err
	}
	s.p.take(m.sid)
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
	last, err := st.node().Bus.LastSeq(ctx, m.sid)
	if err != nil {
		return m, err
	}
	if err := st.node().Projector.WaitFor(ctx, m.sid, last); err != nil {
		return m, err
	}
	m.caught = time.Now()
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

// stepFloor is a measured turn's floor: its events appended again as raw
// fenced appends, its checkpoint put again, each step's events applied to a
// fresh store.
type stepFloor struct {
	appends    sample // one per event of the turn, in order
	kvPut      time.Duration
	applies    sample // one per step
	groups     [][]event.Event
	checkpoint int // the checkpoint's size
}

// floorOf measures turn m's floor as session f_step<i>, with the read model
// paused.
func (s *stepScenario) floorOf(ctx context.Context, i int, m stepTurn) (stepFloor, error) {
	var f stepFloor
	b := s.st.node().Bus
	resume := s.st.pauseProjector(ctx)
	fsid := fmt.Sprintf("f_step%03d", i)
	var err error
	if f.appends, err = appendRaw(ctx, b, fsid, m.events()); err != nil {
		return f, err
	}
	// A short turn may have written no checkpoint (CheckpointEvery): then
	// its floor has none either.
	kv := b.Checkpoints()
	entry, err := kv.Get(ctx, m.sid)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return f, fmt.Errorf("checkpoint of %s: %w", m.sid, err)
	default:
		f.checkpoint = len(entry.Value())
		t := time.Now()
		if _, err := kv.Put(ctx, fsid, entry.Value()); err != nil {
			return f, err
		}
		f.kvPut = time.Since(t)
	}
	f.groups = stepGroups(m.events())
	db := filepath.Join(s.st.c.Layout().Dir, fmt.Sprintf("floor-%d.db", i))
	if f.applies, err = applyFloor(ctx, db, m.all[:m.start], f.groups); err != nil {
		return f, err
	}
	return f, resume(true)
}

// stepGroups splits a turn's events into one group per LLM step, at record
// boundaries (the read model applies whole records): each group from the
// record that holds the step's llm.started (with what was staged before it:
// the previous step's tool results, or the turn's start) to the record before
// the next one's (the first group also has what came before, the last the end
// of the turn).
func stepGroups(turn []event.Event) [][]event.Event {
	var out [][]event.Event
	start, hasLLM := 0, false
	for i := 0; i < len(turn); {
		j := i + 1 // turn[i:j] is a record: the events of one sequence
		for j < len(turn) && turn[i].Seq != 0 && turn[j].Seq == turn[i].Seq {
			j++
		}
		if slices.ContainsFunc(turn[i:j], func(e event.Event) bool { return e.Type == event.LLMStarted }) {
			if hasLLM {
				out = append(out, turn[start:i])
				start = i
			}
			hasLLM = true
		}
		i = j
	}
	if start < len(turn) {
		out = append(out, turn[start:])
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
