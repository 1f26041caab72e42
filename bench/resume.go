package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// ResumeResult is row 4: how long a fresh node takes from a session's first
// input to its first LLM call, against the length of the session's history.
type ResumeResult struct {
	Durability    string         `json:"durability"`
	Others        int            `json:"other_sessions"`
	StreamEvents  uint64         `json:"stream_events"`
	ContextBudget int            `json:"context_chars"`
	Build         time.Duration  `json:"build_ns"`
	Lengths       []ResumeLength `json:"lengths"`
	Ratio         float64        `json:"ratio_longest_to_shortest"`
	Repeats       int            `json:"repeats"`
}

// ResumeLength is one history length.
type ResumeLength struct {
	Events int `json:"events"`
	// FirstCall is the median time from publishing the input to the first
	// LLM call on a node started afresh (a new Manager, actor and server).
	FirstCall    time.Duration `json:"first_call_ns"`
	FirstCallMin time.Duration `json:"first_call_min_ns"`
	FirstCallMax time.Duration `json:"first_call_max_ns"`
	// TurnEnd is the median time from the resumed turn's last LLM answer to
	// its outcome: agent.finished and the end-of-turn checkpoint.
	TurnEnd time.Duration `json:"turn_end_ns"`
	// Checkpoint is what the resume found: the snapshot's size and the events
	// it covers; the rest of the history (Tail) is replayed.
	CheckpointBytes  int `json:"checkpoint_bytes"`
	CheckpointEvents int `json:"checkpoint_events"`
	Tail             int `json:"tail_events"`
	StateMessages    int `json:"messages"`
	LLMStartedBytes  int `json:"last_llm_started_bytes"`

	// Where the time goes, measured apart: decoding the checkpoint found;
	// Load is what the actor does before its claim: get and decode the
	// checkpoint, replay and fold the tail after it.
	CheckpointDecode time.Duration `json:"checkpoint_decode_ns"`
	Load             time.Duration `json:"load_ns"`
	// StateBytes is the snapshot a checkpoint of the full history would
	// take (what the actor tries to put at the end of each turn; the bucket
	// refuses more than the server's max payload, 8 MiB). SlimBytes is the
	// same without the requests and responses of finished steps (they are in
	// the log and the read model), and SlimDecode the time to decode it.
	StateBytes int           `json:"state_bytes"`
	SlimBytes  int           `json:"slim_state_bytes"`
	SlimDecode time.Duration `json:"slim_decode_ns"`
}

// benchResume builds the histories (with fsync every 2 minutes, to build
// fast), then restarts the node with durability syncEvery and resumes each
// session, cfg.resumeRepeats times, each on a node started afresh.
func benchResume(ctx context.Context, cfg config, syncEvery time.Duration, log io.Writer) (*ResumeResult, error) {
	res := &ResumeResult{Durability: durabilityName(syncEvery), Others: cfg.resumeOthers, ContextBudget: cfg.resumeBudget, Repeats: cfg.resumeRepeats}
	tool, final := scriptedMocks(0)
	p := newProbe(tool, final, true)
	scfg := session.Config{ContextChars: cfg.resumeBudget}
	st, err := startStack(ctx, stackOpts{tmp: cfg.tmp, sync: 2 * time.Minute, provider: p, session: scfg})
	if err != nil {
		return nil, err
	}
	dir := st.dir
	closed := false
	defer func() {
		if !closed {
			st.close(ctx, true)
		}
	}()
	b := st.n.Bus
	begin := time.Now()

	// The other sessions' turns have five LLM calls (about 26 events); the
	// measured sessions' turns 20 (about 100 events), so that building 10,000
	// events takes fewer turns, each ending with a checkpoint.
	const otherSteps, toolSteps = 4, 19
	targets := cfg.resumeLengths
	// A session resumed first on each fresh node, so that the measured
	// resumes do not pay for the node's first turn.
	const warm = "s_reswarm"
	if err := st.create(ctx, warm); err != nil {
		return nil, err
	}
	if _, err := st.run(ctx, warm, input(warm, 0)); err != nil {
		return nil, err
	}
	sids := make([]string, len(targets))
	for i, l := range targets {
		sids[i] = fmt.Sprintf("s_res%06d", l)
		if err := st.create(ctx, sids[i]); err != nil {
			return nil, err
		}
	}
	others := make([]string, cfg.resumeOthers)
	if err := parallel(ctx, len(others), 32, func(i int) error {
		others[i] = fmt.Sprintf("s_oth%06d", i)
		return st.create(ctx, others[i])
	}); err != nil {
		return nil, err
	}
	// The first turn of a session of their own is the template of the other
	// sessions' turns.
	const model = "s_resmodel"
	if err := st.create(ctx, model); err != nil {
		return nil, err
	}
	if _, err := st.run(ctx, model, input(model, otherSteps)); err != nil {
		return nil, err
	}
	tmpl, _, err := b.Replay(ctx, model, 2) // from session.claimed on
	if err != nil {
		return nil, err
	}
	// The measured sessions' turns: the first one's length.
	if _, err := st.run(ctx, sids[0], input(sids[0], toolSteps)); err != nil {
		return nil, err
	}
	firstTurn, _, err := b.Replay(ctx, sids[0], 1)
	if err != nil {
		return nil, err
	}
	perTurn := len(firstTurn) - 2 // less session.created and session.claimed
	// Rounds: the longest history's turns; every target spreads its turns
	// evenly over them, and each round appends a turn of some other sessions,
	// so that every history is interleaved with the others' from start to end.
	rounds := targets[len(targets)-1]/perTurn + 1
	for _, l := range targets {
		rounds = max(rounds, l/perTurn+1)
	}
	turnsOf := make([]int, len(targets))
	for i, l := range targets {
		turnsOf[i] = max(1, (l+perTurn-1)/perTurn)
	}
	turnsOf[0]-- // the template turn
	done := make([]int, len(targets))
	nextOther := 0
	for r := range rounds {
		for i := range targets {
			if done[i] < turnsOf[i] && done[i]*rounds <= r*turnsOf[i] {
				if _, err := st.run(ctx, sids[i], input(sids[i], toolSteps)); err != nil {
					return nil, err
				}
				done[i]++
				p.take(sids[i])
			}
		}
		// Each other session gets one turn (the template's events), the
		// turns spread evenly over the rounds.
		upto := min(len(others), (r+1)*len(others)/rounds)
		if err := parallel(ctx, upto-nextOther, 8, func(j int) error {
			sid := others[nextOther+j]
			w, err := b.Writer(sid, 1, 0)
			if err != nil {
				return err
			}
			last, err := b.LastSeq(ctx, sid)
			if err != nil {
				return err
			}
			if w, err = b.Writer(sid, 1, last); err != nil {
				return err
			}
			for _, e := range tmpl {
				e.Session, e.Seq, e.Epoch = sid, 0, 0
				if _, err := w.Append(ctx, e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("other sessions: %w", err)
		}
		nextOther = upto
		if r%100 == 99 {
			fmt.Fprintf(log, "  round %d of %d\n", r+1, rounds)
		}
	}
	// Top up to the lengths asked (turns vary by an event or two).
	for i, l := range targets {
		for {
			evs, _, err := b.Replay(ctx, sids[i], 1)
			if err != nil {
				return nil, err
			}
			if len(evs)+perTurn/2 >= l {
				break
			}
			for range (l - len(evs) + perTurn - 1) / perTurn {
				if _, err := st.run(ctx, sids[i], input(sids[i], toolSteps)); err != nil {
					return nil, err
				}
			}
		}
	}
	p.reset()
	res.Build = time.Since(begin)
	if err := st.close(ctx, false); err != nil {
		return nil, err
	}
	closed = true

	res.Lengths = make([]ResumeLength, len(targets))
	times := make([][]time.Duration, len(targets))
	ends := make([][]time.Duration, len(targets))
	for rep := range cfg.resumeRepeats {
		st, err = startStack(ctx, stackOpts{dir: dir, sync: syncEvery, provider: p, session: scfg})
		if err != nil {
			return nil, err
		}
		closed = false
		b = st.n.Bus
		// Let the read model catch up first: its work is not the resume's.
		info, err := b.JetStream().Stream(ctx, wire.EventStream)
		if err != nil {
			return nil, err
		}
		res.StreamEvents = info.CachedInfo().State.Msgs
		if err := st.n.Projector.WaitFor(ctx, info.CachedInfo().State.LastSeq); err != nil {
			return nil, err
		}
		if _, err := st.run(ctx, warm, input(warm, 0)); err != nil {
			return nil, err
		}
		for k := range sids {
			i := (k + rep) % len(sids) // a different order each time
			sid := sids[i]
			if rep == 0 {
				if err := describe(ctx, b, sid, &res.Lengths[i]); err != nil {
					return nil, err
				}
			}
			t0 := time.Now()
			r, err := st.runAt(ctx, sid, input(sid, 0))
			if err != nil {
				return nil, err
			}
			calls := p.take(sid)
			if len(calls) == 0 {
				return nil, fmt.Errorf("resume of %s: no LLM call", sid)
			}
			times[i] = append(times[i], calls[0].start.Sub(t0))
			ends[i] = append(ends[i], r.at.Sub(calls[len(calls)-1].end))
		}
		if err := st.close(ctx, false); err != nil {
			return nil, err
		}
		closed = true
	}
	for i := range targets {
		l := &res.Lengths[i]
		l.FirstCall = medianDur(times[i])
		l.FirstCallMin, l.FirstCallMax = sample(times[i]).pct(0), sample(times[i]).pct(100)
		l.TurnEnd = medianDur(ends[i])
	}
	res.Ratio = float64(res.Lengths[len(targets)-1].FirstCall) / float64(res.Lengths[0].FirstCall)
	st.close(ctx, true) // remove the directory
	return res, nil
}

// describe reports what a resume of sid finds: its history's length, the
// checkpoint's size and coverage, and what decoding it and replaying the
// rest cost.
func describe(ctx context.Context, b *bus.Bus, sid string, l *ResumeLength) error {
	evs, _, err := b.Replay(ctx, sid, 1)
	if err != nil {
		return err
	}
	l.Events = len(evs)
	for j := len(evs) - 1; j >= 0; j-- {
		if evs[j].Type == event.LLMStarted {
			body, _ := evs[j].Marshal()
			l.LLMStartedBytes = len(body)
			break
		}
	}
	full, _ := projection.Fold(evs)
	l.StateMessages = len(full.Messages)
	fb, _ := json.Marshal(full)
	l.StateBytes = len(fb)
	slim := full
	slim.Steps = append([]projection.Step(nil), full.Steps...)
	for i := range slim.Steps {
		if slim.Steps[i].Status.Done() {
			slim.Steps[i].Request, slim.Steps[i].Response = nil, nil
		}
	}
	sb, _ := json.Marshal(slim)
	l.SlimBytes = len(sb)
	l.SlimDecode = timeMedian(3, func() { var s projection.State; _ = json.Unmarshal(sb, &s) })

	if e, err := b.Checkpoints().Get(ctx, sid); err == nil {
		l.CheckpointBytes = len(e.Value())
		var snap projection.State
		if err := json.Unmarshal(e.Value(), &snap); err == nil {
			l.CheckpointEvents = snap.Events
		}
		l.CheckpointDecode = timeMedian(3, func() { var s projection.State; _ = json.Unmarshal(e.Value(), &s) })
	}
	l.Tail = l.Events - l.CheckpointEvents
	var lerr error
	l.Load = timeMedian(3, func() {
		var st projection.State
		from := uint64(1)
		e, err := b.Checkpoints().Get(ctx, sid)
		if err == nil && json.Unmarshal(e.Value(), &st) == nil {
			from = st.LastSeq + 1
		}
		var tail []event.Event
		if tail, _, lerr = b.Replay(ctx, sid, from); lerr == nil {
			_ = projection.FoldInto(&st, tail)
		}
	})
	return lerr
}

// timeMedian runs fn n times and returns the median duration.
func timeMedian(n int, fn func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		t := time.Now()
		fn()
		ds[i] = time.Since(t)
	}
	return medianDur(ds)
}
