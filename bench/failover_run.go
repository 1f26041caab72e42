package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// Row 7's bounds.
const (
	// foStartWithin bounds a turn's start through the client (its input's
	// publish included) before the kill, and each wait for turns to finish.
	foStartWithin = 30 * time.Second
	// foMovedWithin bounds the wait for the sessions' first LLM calls on a
	// survivor after the kill.
	foMovedWithin = 45 * time.Second
)

// prepareSessions creates the sessions on the victim's partitions; the idle
// ones take one turn on it first: they are its sessions, claimed by it, with
// nothing running.
func (s *failoverScenario) prepareSessions(ctx context.Context) error {
	s.running, s.idle = s.pick(runPrefix, s.cfg.FailoverSessions), s.pick(idlePrefix, s.cfg.FailoverSessions)
	s.inputs = map[string][]string{}
	all := append(slices.Clone(s.running), s.idle...)
	if err := parallel(ctx, len(all), 8, func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, foStartWithin)
		defer cancel()
		_, err := s.cl.Create(cctx, wire.CreateRequest{Session: all[i]})
		return err
	}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := parallel(ctx, len(s.idle), 8, func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, foStartWithin)
		defer cancel()
		t, err := startTurn(cctx, s.cl, s.idle[i], wire.Input{ID: "warm_" + s.idle[i], Text: input(s.idle[i], 0)})
		if err != nil {
			return err
		}
		_, err = t.wait(cctx)
		return err
	}); err != nil {
		return fmt.Errorf("warm-up turns on %s: %w", s.victimID(), err)
	}
	for _, sid := range s.idle {
		s.inputs[sid] = []string{"warm_" + sid}
		rep, err := s.audit(ctx, sid)
		if err != nil {
			return err
		}
		if rep.Owner() != s.victimID() {
			return fmt.Errorf("%s's warm-up turn ran on %s, not on %s", sid, rep.Owner(), s.victimID())
		}
	}
	return nil
}

// audit reads session sid's log through the client and audits it.
func (s *failoverScenario) audit(ctx context.Context, sid string) (projection.Report, error) {
	evs, err := readLog(ctx, s.cl, sid, 0)
	if err != nil {
		return projection.Report{}, err
	}
	return projection.Audit(evs), nil
}

// Run starts the turns the victim's model holds, kills the victim, sends
// the idle sessions an input, and measures when each session goes on on a
// survivor; then it checks every session's log.
func (s *failoverScenario) Run(ctx context.Context, rep *Report) error {
	if err := s.startRunning(ctx); err != nil {
		return err
	}
	s.leaders()
	pr := &presenceTracker{parts: s.res.Partitions, killed: s.victimID(), last: map[string]wire.NodeRecord{}, heard: map[string]time.Time{}}
	sub, err := s.cl.Conn().Subscribe(wire.NodeSubjects, pr.heardMsg)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	time.Sleep(s.res.NodeTTL / 5 * 3 / 2) // a presence of every node heard

	t0 := time.Now()
	if s.cut {
		if err := s.stop(); err != nil {
			return err
		}
	} else {
		s.c.Kill(foVictim)
	}
	s.res.KillTook = time.Since(t0)
	s.res.HeartbeatAge = pr.killedAt(t0)
	s.env.Note("killed %s (%s; %d turns in flight, %d idle sessions) after %s; its server led the meta group: %v, %d of %d streams %v, %d of %d consumers",
		s.victimID(), s.kill(), len(s.running), len(s.idle), fdur(time.Since(s.begin).Round(time.Millisecond)), s.res.VictimMetaLeader,
		s.res.VictimStreamsLed, s.res.Streams, s.res.VictimStreams, s.res.VictimConsLed, s.res.Consumers)
	published := s.sendAfterKill(ctx, t0)
	s.moved(ctx, t0)
	for range s.idle {
		if r := <-published; r.err != nil {
			s.problem("input to %s not published within %v of the kill: %v", r.sid, foStartWithin, r.err)
		} else {
			s.res.PublishMax = max(s.res.PublishMax, r.at)
			s.turns = append(s.turns, r.t)
		}
	}
	s.check(ctx, t0)
	// The survivors' presence, until it has shared every partition between
	// them for 2 × NodeTTL (a later disagreement would show there).
	_ = natstest.Poll(max(presenceWindow-time.Since(t0), 0), 20*time.Millisecond, natstest.Until(func() bool { return pr.settled(2 * s.res.NodeTTL) }))
	p := pr.result()
	s.res.Rebalanced, s.res.DoubleFrom, s.res.DoubleUntil, s.res.DoubleMax = p.rebalanced, p.doubleFrom, p.doubleUntil, p.doubleMax
	for _, f := range s.fences.since(t0) {
		if f.Node != s.victimID() {
			s.res.SurvivorFences = append(s.res.SurvivorFences, f)
		}
	}
	s.signals(t0)
	if s.cut {
		s.resume(ctx, t0)
	}
	s.notes()
	s.res.Took = time.Since(s.begin)
	if s.cut {
		rep.FailoverCut = s.res
		return nil
	}
	rep.Failover = s.res
	return nil
}

func (s *failoverScenario) problem(format string, args ...any) {
	s.res.Problems = append(s.res.Problems, fmt.Sprintf(format, args...))
}

// startRunning starts the turns the victim's model holds, spread over one
// keep-alive period of their inputs (InputAckWait/3), so that the kill
// finds their ack timers at every phase, as it would find real turns; and
// waits until each has its LLM call open.
func (s *failoverScenario) startRunning(ctx context.Context) error {
	keepAlive := s.res.InputAckWait / 3
	for i, sid := range s.running {
		id := "run_" + sid
		s.inputs[sid] = []string{id}
		if i > 0 {
			time.Sleep(keepAlive / time.Duration(len(s.running)))
		}
		cctx, cancel := context.WithTimeout(ctx, foStartWithin)
		t, err := startTurn(cctx, s.cl, sid, wire.Input{ID: id, Text: input(sid, 0)})
		cancel()
		if err != nil {
			return fmt.Errorf("input: %w", err)
		}
		s.turns = append(s.turns, t)
	}
	held := 0
	err := natstest.Poll(foStartWithin, 50*time.Millisecond, func() error {
		held = 0
		for _, sid := range s.running {
			rep, err := s.audit(ctx, sid)
			if err != nil {
				return err
			}
			if t, ok := rep.Running(); ok && len(t.Events) > 0 && t.Events[len(t.Events)-1].Type == event.LLMStarted {
				held++
			}
		}
		if held < len(s.running) {
			return fmt.Errorf("%d of %d turns in flight on %s", held, len(s.running), s.victimID())
		}
		return nil
	})
	s.held = time.Now()
	return err
}

// leaders notes what the victim's server leads in the JetStream cluster.
func (s *failoverScenario) leaders() {
	l := s.c.Leaders()
	res := s.res
	res.VictimMetaLeader = l.Meta == foVictim
	for name, at := range l.Streams {
		res.Streams++
		if at == foVictim {
			res.VictimStreamsLed++
			res.VictimStreams = append(res.VictimStreams, name)
		}
	}
	sort.Strings(res.VictimStreams)
	for _, at := range l.Consumers {
		res.Consumers++
		if at == foVictim {
			res.VictimConsLed++
		}
	}
}

// published is an input sent after the kill: its turn, or why it could not
// be sent, and when it was stored, after the kill.
type published struct {
	sid string
	t   *turn
	at  time.Duration
	err error
}

// sendAfterKill sends each idle session an input through the client, all at
// once, and returns where each is reported.
func (s *failoverScenario) sendAfterKill(ctx context.Context, t0 time.Time) <-chan published {
	out := make(chan published, len(s.idle))
	for _, sid := range s.idle {
		id := "in_" + sid
		s.inputs[sid] = append(s.inputs[sid], id)
		go func() { // ends within foStartWithin
			cctx, cancel := context.WithTimeout(ctx, foStartWithin)
			defer cancel()
			t, err := startTurn(cctx, s.cl, sid, wire.Input{ID: id, Text: input(sid, 0)})
			r := published{sid: sid, t: t, err: err}
			if err == nil {
				r.at = t.stored.Sub(t0)
			}
			out <- r
		}()
	}
	return out
}

// moved waits for the first LLM call of each session on a survivor after
// the kill, and notes when each came and where.
func (s *failoverScenario) moved(ctx context.Context, t0 time.Time) {
	all := append(slices.Clone(s.running), s.idle...)
	_ = natstest.Poll(foMovedWithin, 20*time.Millisecond, natstest.Until(func() bool {
		for _, sid := range all {
			if _, ok := s.rec.first(sid, t0); !ok {
				return ctx.Err() != nil
			}
		}
		return true
	}))
	times := func(sids []string) (times sample, missing []string) {
		for _, sid := range sids {
			x, ok := s.rec.first(sid, t0)
			if !ok {
				missing = append(missing, sid)
				continue
			}
			times = append(times, x.at.Sub(t0))
			s.res.TakenBy[x.node]++
		}
		slices.Sort(times)
		return times, missing
	}
	res := s.res
	rt, missing := times(s.running)
	if len(missing) > 0 {
		s.problem("%d turns in flight did not go on within %v: %v", len(missing), foMovedWithin, missing)
	}
	it, missing := times(s.idle)
	if len(missing) > 0 {
		s.problem("%d inputs sent after the kill were not served within %v: %v", len(missing), foMovedWithin, missing)
	}
	res.RunningTimes, res.IdleTimes = rt, it
	res.RunningP50, res.IdleP50 = rt.p50(), it.p50()
	res.RunningMax, res.IdleMax = rt.pct(100), it.pct(100)
	if len(rt) < len(s.running) {
		res.RunningMax = foMovedWithin // at least
	}
	if len(it) < len(s.idle) {
		res.IdleMax = foMovedWithin // at least
	}
}
