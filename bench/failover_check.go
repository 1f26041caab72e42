package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// check waits for every turn's outcome and then for every session's log to
// show each of its inputs' turns ended, and audits the logs
// (projection.Audit): each input started exactly one turn, which finished
// once; no owner wrote after a newer one's claim; no session is left owned
// by the victim. Finished is when the last turn finished.
func (s *failoverScenario) check(ctx context.Context, t0 time.Time) {
	wctx, cancel := context.WithTimeout(ctx, foStartWithin)
	defer cancel()
	for _, t := range s.turns {
		if _, err := t.wait(wctx); err != nil {
			s.problem("%v", err)
		}
	}
	reps := map[string]projection.Report{}
	err := natstest.Poll(foStartWithin, 50*time.Millisecond, func() error {
		for _, sid := range slices.Sorted(maps.Keys(s.inputs)) {
			rep, err := s.audit(ctx, sid)
			if err != nil {
				return err
			}
			reps[sid] = rep
			for _, id := range s.inputs[sid] {
				if !rep.InputEnded(id) {
					return fmt.Errorf("%s: the turn of input %s has not ended", sid, id)
				}
			}
		}
		return nil
	})
	if err != nil {
		s.problem("turns not finished: %v", err)
	}
	var last time.Time
	for _, sid := range slices.Sorted(maps.Keys(reps)) {
		rep := reps[sid]
		for _, p := range rep.CheckInputs(s.inputs[sid]...) {
			s.problem("%s", p)
		}
		if rep.Owner() == s.victimID() {
			s.problem("%s: still owned by %s, the killed node", sid, s.victimID())
		}
		for _, t := range rep.Turns {
			for _, e := range t.Ends {
				if e.Time.After(last) {
					last = e.Time
				}
			}
		}
	}
	s.res.Finished = last.Sub(t0)
}

// notes writes what row 7 measured to the progress log.
func (s *failoverScenario) notes() {
	res, note := s.res, s.env.Note
	note("running turns moved: p50 %s, max %s; inputs after the kill: p50 %s, max %s (published within %s; victim's heartbeat %s old at the kill); taken by %v",
		fdur(res.RunningP50), fdur(res.RunningMax), fdur(res.IdleP50), fdur(res.IdleMax), fdur(res.PublishMax), fdur(res.HeartbeatAge), res.TakenBy)
	for _, f := range res.SurvivorFences {
		note("%s, a survivor, fenced itself (stopped all its sessions) %s after the kill", f.Node, fdur(f.After))
	}
	if res.DoubleMax > 0 {
		note("both survivors' presence listed up to %d partitions each, from %s to %s after the kill", res.DoubleMax, fdur(res.DoubleFrom), fdur(res.DoubleUntil))
	}
	note("the survivors' presence shared every partition between them for good after %s (0: not within %s); the last turn finished after %s",
		fdur(res.Rebalanced), fdur(presenceWindow), fdur(res.Finished))
	for _, p := range res.Problems {
		note("PROBLEM: %s", p)
	}
}
