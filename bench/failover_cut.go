package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// Row 7's cut-off case: the victim is sent SIGSTOP, so that its sockets stay
// open and the others see only silence (no FIN, no RST, its listening port
// still accepting), as when its host vanishes from the network; the node's
// design leaves that to the silence timeout (NodeTTL). Once the survivors
// carry everything on, it is sent SIGCONT: it must take itself for out of
// touch and write nothing more (its turns' held LLM calls returned while it
// was stopped, so it has their answers to write at once).
const (
	// cutHoldMargin is how long after every held call has returned the
	// victim is continued, at the earliest.
	cutHoldMargin = 500 * time.Millisecond
	// cutFenceWithin bounds the wait for the continued victim's "out of
	// touch with NATS" warning.
	cutFenceWithin = 15 * time.Second
	// cutWatch is how long the continued victim is left to run after it
	// fenced itself before the logs are audited: its held answers are
	// handled at once, the wait only lets a write that was let through land.
	cutWatch = 3 * time.Second
	// cutAuditWithin bounds the tries of each session's audit after the
	// SIGCONT.
	cutAuditWithin = 30 * time.Second
	// cutLogLines is how many of the victim's warnings after its SIGCONT
	// the result keeps.
	cutLogLines = 8
)

// signal sends sig to the victim's process.
func (s *failoverScenario) signal(sig syscall.Signal) error {
	cmd := s.victim.Load()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("%s: no process to send %v", s.victimID(), sig)
	}
	if err := syscall.Kill(cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("%s: %v: %w", s.victimID(), sig, err)
	}
	return nil
}

// stop cuts the victim off: SIGSTOP.
func (s *failoverScenario) stop() error { return s.signal(syscall.SIGSTOP) }

// resume continues the stopped victim once its held calls have returned,
// waits for it to fence itself, and audits every session's log for a write
// of the victim after the kill; then kills it.
func (s *failoverScenario) resume(ctx context.Context, t0 time.Time) {
	res := s.res
	if d := time.Until(s.held.Add(cutHold + cutHoldMargin)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return
		}
	}
	before := len(s.c.LogTail(foVictim, 1<<30))
	after := func() string {
		if l := s.c.LogTail(foVictim, 1<<30); len(l) >= before {
			return l[before:]
		}
		return ""
	}
	tc := time.Now()
	if err := s.signal(syscall.SIGCONT); err != nil {
		s.problem("%v", err)
		return
	}
	res.Stopped = tc.Sub(t0)
	res.VictimFenced = -1
	err := natstest.Poll(cutFenceWithin, 20*time.Millisecond, func() error {
		if strings.Contains(after(), logOutOfTouch) {
			res.VictimFenced = time.Since(tc)
			return nil
		}
		return errors.New("no warning")
	})
	if err != nil {
		s.problem("%s did not take itself for out of touch within %v of its SIGCONT", s.victimID(), cutFenceWithin)
	}
	time.Sleep(cutWatch)
	for _, sid := range slices.Sorted(maps.Keys(s.inputs)) {
		// The continued server's Raft groups come back with higher terms and
		// depose the leaders elected meanwhile: JetStream may answer "temporarily
		// unavailable" for a while.
		var rep projection.Report
		err := natstest.Poll(cutAuditWithin, 200*time.Millisecond, func() error {
			var err error
			rep, err = s.audit(ctx, sid)
			return err
		})
		if err != nil {
			s.problem("%s: audit after the SIGCONT: %v", sid, err)
			continue
		}
		for _, p := range rep.CheckInputs(s.inputs[sid]...) {
			s.problem("after the SIGCONT: %s", p)
		}
		owner := map[uint64]string{}
		for _, c := range rep.Claims {
			owner[c.Epoch] = c.Node
		}
		for _, e := range rep.Events {
			if e.Epoch == 0 || owner[e.Epoch] != s.victimID() {
				continue
			}
			c, ok := rep.ClaimAt(e)
			if e.Time.After(t0) || (ok && c.Node != s.victimID()) {
				res.VictimWrites++
				s.problem("%s: %s wrote %s at seq %d after it was cut off", sid, s.victimID(), e.Type, e.Seq)
			}
		}
	}
	for _, line := range strings.Split(after(), "\n") {
		if strings.Contains(line, "fenced: another writer owns the session") {
			res.VictimRefused++
		}
		// Its own warnings, not its NATS server's.
		if len(res.VictimLog) < cutLogLines && !strings.Contains(line, "component=nats") && (strings.Contains(line, "WARN") || strings.Contains(line, "ERROR")) {
			res.VictimLog = append(res.VictimLog, line)
		}
	}
	s.c.Kill(foVictim)
}

// signals notes what the survivors' logs said of the victim after the kill,
// and which signal fired: the NATS servers' (the first survivor that took
// the victim for dead on it) or the silence.
func (s *failoverScenario) signals(t0 time.Time) { s.noteSignals(t0, s.victimID()) }

func (s *failoverScenario) noteSignals(t0 time.Time, victim string) {
	res := s.res
	for _, x := range s.fences.signalsSince(t0) {
		if x.node == victim || (x.about != "" && x.about != victim) {
			continue
		}
		res.Signals = append(res.Signals, FoSignal{Node: x.node, What: x.what, After: x.at.Sub(t0)})
		if res.Signal == "" && strings.HasPrefix(x.what, signalDeclared) {
			res.Signal = x.what
		}
	}
	if res.Signal == "" {
		res.Signal = signalSilence
	}
	res.ReadTimeouts = s.fences.timeoutsSince(t0)
}
