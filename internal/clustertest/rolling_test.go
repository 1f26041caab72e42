package clustertest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRollingRestart: clients keep sending inputs to six sessions, each
// waiting for its input's turn to end (its outcome, or the log) before the
// next; meanwhile node 1, then 2, then 3 is stopped with SIGTERM and started
// again on the same data directory and ports. At the end every input sent
// started exactly one turn, which finished exactly once: none was lost, none
// ran twice.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, clusterOptions{pace: 10 * time.Millisecond})
	cl := newClient(t, c)
	presence := true
	if recs, err := cl.waitBalanced(c.ids(), 60*time.Second); err != nil {
		presence = false
		t.Logf("tah_nodes is not balanced before the test (partition balancing missing?): %v", err)
	} else {
		t.Logf("tah_nodes: %s", describeNodes(recs))
	}

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
				if err := waitTurn(cl, sid, id, ch, 90*time.Second); err != nil {
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
		if err := poll(90*time.Second, 200*time.Millisecond, func() (bool, error) {
			got := ended.Load()
			return got >= target, fmt.Errorf("%d turns ended, want %d", got, target)
		}); err != nil {
			t.Errorf("no progress %s: %v", what, err)
		}
	}
	progress("before the restarts", sessions)
	for _, n := range c.nodes {
		t.Logf("restarting %s (%d turns ended so far)", n.id, ended.Load())
		phase := time.Now()
		step := func(what string) {
			t.Logf("  %s: %s after %v", n.id, what, time.Since(phase).Round(time.Millisecond))
			phase = time.Now()
		}
		if err := n.stop(60 * time.Second); err != nil {
			t.Errorf("node %s, stopped with SIGTERM: %v\n%s", n.id, err, n.lastLog(40))
			n.kill()
		}
		if presence {
			// Its presence is gone (deleted at a clean stop, or expired).
			if err := poll(30*time.Second, 200*time.Millisecond, func() (bool, error) {
				recs, err := cl.nodes()
				if err != nil {
					return false, err
				}
				for _, r := range recs {
					if r.Node == n.id {
						return false, fmt.Errorf("still listed: %s", describeNodes(recs))
					}
				}
				return true, nil
			}); err != nil {
				t.Errorf("node %s stopped, but tah_nodes %v", n.id, err)
			}
		}
		step("stopped, out of tah_nodes")
		progress("while "+n.id+" is down", sessions/2)
		step("progress while down")
		n.start()
		n.waitReady()
		step("started and ready")
		if presence {
			if recs, err := cl.waitBalanced(c.ids(), 60*time.Second); err != nil {
				t.Errorf("after the restart of %s, tah_nodes: %v", n.id, err)
			} else {
				t.Logf("after the restart of %s: %s", n.id, describeNodes(recs))
			}
		}
		step("balanced")
		progress("after the restart of "+n.id, sessions/2)
		step("progress after the restart")
	}
	close(stop)
	wg.Wait()
	t.Logf("%d turns ended", ended.Load())

	resumed, claims := 0, 0
	for i, sid := range sids {
		evs, err := cl.replay(sid)
		if err != nil {
			t.Errorf("replay %s: %v", sid, err)
			continue
		}
		l := analyze(sid, evs)
		resumed += l.resumed()
		claims += len(l.claims)
		if probs := l.checkInputs(sent[i]); len(probs) > 0 {
			t.Errorf("session %s:\n  %s\n%s", sid, strings.Join(probs, "\n  "), l.dump())
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
// lost) the log shows the turn's end.
func waitTurn(cl *client, sid, id string, ch <-chan outcome, bound time.Duration) error {
	deadline := time.After(bound)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case o := <-ch:
			if o.Status != "completed" || o.FailureCode != "" {
				return fmt.Errorf("outcome %+v, want completed", o)
			}
			return nil
		case <-tick.C:
			evs, err := cl.replay(sid)
			if err == nil && analyze(sid, evs).inputEnded(id) {
				return nil
			}
		case <-deadline:
			evs, _ := cl.replay(sid)
			l := analyze(sid, evs)
			return fmt.Errorf("its turn has not ended after %v:\n%s", bound, l.dump())
		}
	}
}
