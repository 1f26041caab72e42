package clustertest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// TestRollingRestart: clients keep sending inputs to six sessions, each
// waiting for its input's turn to end (its outcome, or the log) before the
// next; meanwhile node 1, then 2, then 3 is stopped with SIGTERM and started
// again on the same data directory and ports. At the end every input sent
// started exactly one turn, which finished exactly once: none was lost, none
// ran twice.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, tahtest.Options{Pace: 10 * time.Millisecond})
	cl := newClient(t, c)
	t.Logf("tah_nodes: %s", tahtest.DescribeNodes(c.WaitBalanced(time.Minute, c.IDs()...)))

	const sessions = 6
	sids := make([]string, sessions)
	for i := range sessions {
		sids[i] = cl.create()
	}

	var (
		mu       sync.Mutex
		sent     = make([][]string, sessions) // input ids per session, in order
		problems []string
		ended    atomic.Int64 // turns seen ended
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for i, sid := range sids {
		wg.Add(1)
		go func() { // the traffic of one session: ends when stop is closed
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("in_roll_%d_%03d", i, n)
				mu.Lock()
				sent[i] = append(sent[i], id)
				mu.Unlock()
				ch, err := cl.send(sid, id, fmt.Sprintf("rolling %d.%d: what is in this project?", i, n))
				if err != nil {
					report("%s: input %s was not accepted: %v", sid, id, err)
					return
				}
				if err := waitTurn(c, sid, id, ch, 90*time.Second); err != nil {
					report("%s: input %s: %v", sid, id, err)
					return
				}
				ended.Add(1)
			}
		}()
	}

	// progress waits until n more turns ended.
	progress := func(what string, n int64) {
		t.Helper()
		target := ended.Load() + n
		if err := natstest.Poll(90*time.Second, 200*time.Millisecond, func() error {
			if got := ended.Load(); got < target {
				return fmt.Errorf("%d turns ended, want %d", got, target)
			}
			return nil
		}); err != nil {
			t.Errorf("no progress %s: %v", what, err)
		}
	}
	progress("before the restarts", sessions)
	for i, id := range c.IDs() {
		t.Logf("restarting %s (%d turns ended so far)", id, ended.Load())
		phase := time.Now()
		step := func(what string) {
			t.Logf("  %s: %s after %v", id, what, time.Since(phase).Round(time.Millisecond))
			phase = time.Now()
		}
		c.Stop(i)
		// Its presence is gone (deleted at a clean stop, or expired).
		if err := natstest.Poll(30*time.Second, 200*time.Millisecond, func() error {
			recs, err := cl.nodes()
			if err != nil {
				return err
			}
			for _, r := range recs {
				if r.Node == id {
					return fmt.Errorf("still listed: %s", tahtest.DescribeNodes(recs))
				}
			}
			return nil
		}); err != nil {
			t.Errorf("node %s stopped, but tah_nodes %v", id, err)
		}
		step("stopped, out of tah_nodes")
		progress("while "+id+" is down", sessions/2)
		step("progress while down")
		c.Start(i)
		step("started and ready")
		if recs, err := c.BalancedWithin(time.Minute, c.IDs()...); err != nil {
			t.Errorf("after the restart of %s, tah_nodes: %v", id, err)
		} else {
			t.Logf("after the restart of %s: %s", id, tahtest.DescribeNodes(recs))
		}
		step("balanced")
		progress("after the restart of "+id, sessions/2)
		step("progress after the restart")
	}
	close(stop)
	wg.Wait()
	t.Logf("%d turns ended", ended.Load())

	resumed, claims := 0, 0
	for i, sid := range sids {
		rep := c.Audit(sid)
		resumed += rep.Resumed()
		claims += len(rep.Claims)
		if probs := rep.CheckInputs(sent[i]...); len(probs) > 0 {
			t.Errorf("session %s:\n%s\n%s", sid, probs, rep.Dump())
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	// Not a requirement (a SIGTERM may fall between turns), but what the test
	// exercised.
	t.Logf("%d claims over %d sessions; %d turns were interrupted by a stop and resumed under a new claim", claims, sessions, resumed)
}

// waitTurn waits until input id's turn in session sid has ended: its outcome
// arrives on ch, or (an outcome published while the client was reconnecting is
// lost) the log shows the turn's end. It runs on a goroutine of its own: it
// fails nothing, and says what is wrong.
func waitTurn(c *tahtest.Cluster, sid, id string, ch <-chan wire.Outcome, bound time.Duration) error {
	deadline := time.After(bound)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case o := <-ch:
			if !completed(o) {
				return fmt.Errorf("outcome %+v, want completed", o)
			}
			return nil
		case <-tick.C:
			if evs, err := c.Log(sid); err == nil && projection.Audit(evs).InputEnded(id) {
				return nil
			}
		case <-deadline:
			evs, err := c.Log(sid)
			return fmt.Errorf("its turn has not ended after %v (%v):\n%s", bound, err, projection.Audit(evs).Dump())
		}
	}
}
