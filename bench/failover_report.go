package bench

import (
	"fmt"
	"strings"
	"time"
)

// targetFailoverP50 is the scale issue's bound for a kill -9 (item 6): the
// turns in flight go on elsewhere within 3 s at p50. A node that is only cut
// off (no FIN) is left to the silence timeout by design: it has no target
// of its own, its figure is reported beside.
const targetFailoverP50 = 3 * time.Second

// target is the kill's row's target: p50 and max.
func (f *FailoverResult) target() string {
	return fmt.Sprintf("≤ %s p50, ≤ %s max", fdur(targetFailoverP50), fdur(targetFailover))
}

// verdict is the kill's row's verdict on its target.
func (f *FailoverResult) verdict() string {
	var missed []string
	if f.RunningP50 > targetFailoverP50 {
		missed = append(missed, "p50 "+fdur(f.RunningP50))
	}
	if f.RunningMax > targetFailover {
		missed = append(missed, "max "+fdur(f.RunningMax))
	}
	if len(missed) > 0 {
		return "missed: " + strings.Join(missed, ", ")
	}
	return "met"
}

// failoverCutRows are row 7's cut-off case: the times beside the kill's,
// which signal fired, and whether the continued victim was fenced.
func (r *Report) failoverCutRows() []row {
	f := r.FailoverCut
	if f == nil || f.NotMeasured != "" {
		return nil
	}
	setting := fmt.Sprintf("R3; NodeTTL %s, pin TTL %s, ack wait %s; %s", fdur(f.NodeTTL), fdur(f.InputPinnedTTL), fdur(f.InputAckWait), f.Durability)
	verdict := "signal: " + f.Signal
	verdict += "; " + f.fenced()
	if len(f.Problems) > 0 {
		verdict += fmt.Sprintf("; %d correctness problem(s), see below", len(f.Problems))
	}
	runBound, idleBound := f.boundRunning(), f.boundIdle()
	const kill = "an owner cut off (SIGSTOP: sockets left open, no FIN)"
	return []row{
		{"7", fmt.Sprintf("failover: %s to the first LLM call elsewhere of its %d turns in flight, p50 / max", kill, f.Running), setting,
			fdur(f.RunningP50) + " / " + fdur(f.RunningMax), fmt.Sprintf("≤ %s (at worst: the ack wait)", fdur(runBound)),
			fratio(float64(f.RunningMax) / float64(runBound)), "reported (left to the silence by design)", verdict},
		{"7", fmt.Sprintf("failover: %s to the first LLM call elsewhere of an input sent then to one of its %d idle sessions, p50 / max", kill, f.Idle), setting,
			fdur(f.IdleP50) + " / " + fdur(f.IdleMax), fmt.Sprintf("≤ %s (the settings: NodeTTL and one check)", fdur(idleBound)),
			fratio(float64(f.IdleMax) / float64(idleBound)), "", ""},
	}
}

// fenced says what the cut-off victim did once continued.
func (f *FailoverResult) fenced() string {
	if f.VictimFenced < 0 {
		return fmt.Sprintf("continued after %s: **not fenced** within %s, %d writes", fdur(f.Stopped), fdur(cutFenceWithin), f.VictimWrites)
	}
	return fmt.Sprintf("continued after %s: fenced itself %s later, %d writes (%d appends refused)", fdur(f.Stopped), fdur(f.VictimFenced), f.VictimWrites, f.VictimRefused)
}

// failoverCutTarget is the cut-off case's sentence in the targets.
func (r *Report) failoverCutTarget(w func(string, ...any)) {
	f := r.FailoverCut
	if f == nil || f.NotMeasured != "" {
		return
	}
	w("- **Row 7, an owner cut off (no FIN)**, beside the kill: its turns in flight went on after %s at p50, %s at most (signal: %s); %s.\n",
		fdur(f.RunningP50), fdur(f.RunningMax), f.Signal, f.fenced())
}

// failoverCutAnalysis explains the cut-off case.
func (r *Report) failoverCutAnalysis(w func(string, ...any)) {
	f := r.FailoverCut
	if f == nil || f.NotMeasured != "" {
		return
	}
	w("### Failover of an owner cut off: silence, and a server still routed to\n\n")
	w("The cut-off case stops the victim's process (SIGSTOP) instead of killing it: its sockets stay open, so no server sees its connections close, and its listening ports still accept connections (the kernel completes the handshakes), which is what a host that vanished from the network looks like from the others, short of a firewall. The node's design leaves that to the silence: a node is taken for dead on what the NATS servers saw only when its connection closed or its server's port refuses connections, never on a silence shorter than NodeTTL, so that a node that is only slow keeps its sessions. ")
	w("Signal in this run: %s. What the survivors' logs said, after the stop: %s.\n\n", f.Signal, signalsText(f.Signals))
	w("Its turns in flight went on after %s at p50 and %s at most (the kill's: see above), the inputs sent then to its idle sessions after %s and %s; every turn had finished %s after the stop, and the survivors' presence shared every partition between them %s after it. ",
		fdur(f.RunningP50), fdur(f.RunningMax), fdur(f.IdleP50), fdur(f.IdleMax), fdur(f.Finished), fdurOr(f.Rebalanced, fmt.Sprintf("not within %s", fdur(presenceWindow))))
	if f.ReadTimeouts > 0 {
		kill := ""
		if k := r.Failover; k != nil && k.NotMeasured == "" {
			kill = fmt.Sprintf(" (after the kill: %d, while the streams the dead server led elected new leaders)", k.ReadTimeouts)
		}
		w("**The survivors' loads of the sessions timed out %d times**%s: the streams are R3 with `allow_direct`, so a direct get (a checkpoint, a session's records) is answered by any replica, and until the routes to the stopped server are lost (the embedded server pings them every NodeTTL/2, two unanswered; the survivors' logs above say when they saw the routes go) a share of the gets goes to a server that never answers: a read asks again after 2 s, on a reply subject of its own (bus: `directRequest`, the checkpoints' reads), and a load whose reads went unanswered for its whole attempt (15 s) is tried again: the slow tail of this case.\n\n", f.ReadTimeouts, kill)
	} else {
		w("No survivor's read of a session timed out.\n\n")
	}
	w("The victim was continued (SIGCONT) %s after the stop, once every turn had gone on elsewhere and every LLM call it held had returned meanwhile, so that it had their answers to write at once: %s. ", fdur(f.Stopped), f.fenced())
	if len(f.VictimLog) > 0 {
		w("Its first warnings then: %s.", "`"+strings.Join(f.VictimLog, "`; `")+"`")
	}
	w("\n\n")
}

// signalsText lists a run's signals for the analysis.
func signalsText(sigs []FoSignal) string {
	if len(sigs) == 0 {
		return "nothing"
	}
	var out []string
	for _, s := range sigs {
		out = append(out, fmt.Sprintf("%s at %s: %s", s.Node, fdur(s.After), s.What))
	}
	return strings.Join(out, "; ")
}
