package bench

import (
	"log/slog"
	"testing"
	"time"
)

// The survivors' log lines about a dead node are noted with what they say:
// taken for dead on what the NATS servers saw (with why), left to the
// silence, partitions taken over; a read that waited out its deadline is
// counted; other lines are passed on and nothing else is noted.
func TestFenceWatchSignals(t *testing.T) {
	at := &foFences{}
	h := fenceWatch{next: slog.DiscardHandler, node: "n0", at: at}
	log := slog.New(h).With("component", "cluster")
	t0 := time.Now()
	log.Warn(logDeclared+": its partitions move now", "node", "n2", "why", "a disconnect advisory (Client Closed)")
	log.Info("the routes to a node's NATS server were lost, but it may still run: "+logToSilence, "node", "n2")
	log.Info(logPartitions, "pulling", []int{1, 2}, "added", []int{2}, "handed_over", []int{})
	log.Info(logPartitions, "pulling", []int{1}, "added", []int{}, "handed_over", []int{2})
	log.Info(logNotLoaded+"; trying again", "session", "s_1", "err", "replay session s_1 from 1: direct get: context deadline exceeded")
	log.Warn(logCheckpointRead+"; replaying from the start", "session", "s_1", "err", "bad checkpoint")
	log.Info("turn started", "session", "s_1")
	log.Warn(logOutOfTouch+": stopping this node's sessions", "why", "paused")

	sigs := at.signalsSince(t0)
	want := []struct{ about, what string }{
		{"n2", signalDeclared + "a disconnect advisory (Client Closed)"},
		{"n2", signalDismissed + "the routes to a node's NATS server were lost, but it may still run: " + logToSilence},
		{"", logPartitions + ": added [2]"},
	}
	if len(sigs) != len(want) {
		t.Fatalf("signals %+v", sigs)
	}
	for i, w := range want {
		if sigs[i].node != "n0" || sigs[i].about != w.about || sigs[i].what != w.what {
			t.Errorf("signal %d: %+v, want %+v", i, sigs[i], w)
		}
	}
	if n := at.timeoutsSince(t0); n != 1 {
		t.Errorf("%d reads timed out, want 1", n)
	}
	if f := at.since(t0); len(f) != 1 || f[0].Node != "n0" {
		t.Errorf("fences %+v", f)
	}
	if len(at.signalsSince(time.Now().Add(time.Hour))) != 0 {
		t.Error("signals noted after they were said")
	}
}

// Which signal fired: the first survivor's that took the victim for dead on
// the NATS servers' word, else the silence; the victim's own lines and
// those about another node are left out.
func TestFailoverSignals(t *testing.T) {
	t0 := time.Now()
	s := &failoverScenario{fences: &foFences{}, res: &FailoverResult{}}
	victim := "n2"
	add := func(node, about, what string, after time.Duration) {
		s.fences.signals = append(s.fences.signals, foSignal{node: node, about: about, what: what, at: t0.Add(after)})
	}
	add("n0", "", logPartitions+": added [1]", 5*time.Second)
	add("n2", "", logPartitions+": added [3]", time.Second)
	add("n1", "n0", signalDeclared+"a disconnect advisory", time.Second)
	s.noteSignals(t0, victim)
	if s.res.Signal != signalSilence || len(s.res.Signals) != 1 || s.res.Signals[0].Node != "n0" || s.res.Signals[0].After != 5*time.Second {
		t.Fatalf("silence: %q %+v", s.res.Signal, s.res.Signals)
	}
	s.res = &FailoverResult{}
	add("n1", victim, signalDeclared+"the routes to its NATS server n2 were lost", 600*time.Millisecond)
	s.noteSignals(t0, victim)
	if s.res.Signal != signalDeclared+"the routes to its NATS server n2 were lost" || len(s.res.Signals) != 2 {
		t.Fatalf("declared: %q %+v", s.res.Signal, s.res.Signals)
	}
}
