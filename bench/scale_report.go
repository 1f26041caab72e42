package bench

import (
	"fmt"
	"strings"
	"time"
)

// bases are the one-node runs a run of row 9 is compared with: those of
// the same quota (none when there is none), before and after the
// three-node runs.
func (s *ScaleResult) bases(r *ScaleRun) []*ScaleRun {
	var out []*ScaleRun
	for _, b := range append(append([]*ScaleRun{}, s.Runs...), s.Curve...) {
		if b.Nodes == 1 && b.Quota == r.Quota {
			out = append(out, b)
		}
	}
	return out
}

// baseRate is the mean steps/s and CPU-bound rate of r's one-node runs
// (0 without one).
func (s *ScaleResult) baseRate(r *ScaleRun) (steps, cpuBound float64) {
	bs := s.bases(r)
	for _, b := range bs {
		steps += b.StepsPerSec / float64(len(bs))
		cpuBound += b.CPUBound / float64(len(bs))
	}
	return steps, cpuBound
}

// ratio is r's steps/s over its one-node runs' mean (0 without one).
func (s *ScaleResult) ratio(r *ScaleRun) float64 {
	b, _ := s.baseRate(r)
	if b <= 0 {
		return 0
	}
	return r.StepsPerSec / b
}

// cpuRatio is r's CPU-bound rate over its one-node runs' mean (0 without
// one).
func (s *ScaleResult) cpuRatio(r *ScaleRun) float64 {
	_, b := s.baseRate(r)
	if b <= 0 {
		return 0
	}
	return r.CPUBound / b
}

// target is the ratio a run of row 9 must reach (0: none): three nodes in
// the recommended layout (one read-model node, the others workers).
func (r *ScaleRun) target() float64 {
	if r.Nodes != 3 || r.ReadModels != 1 {
		return 0
	}
	if r.Replicas >= 3 {
		return targetScaleR3
	}
	return targetScaleR1
}

// layout names a run's nodes' roles.
func (r *ScaleRun) layout() string {
	switch {
	case r.Floor:
		return fmt.Sprintf("the floor, %d NATS servers alone", r.Nodes)
	case r.Nodes == 1 && r.Again:
		return "1 node, again after the 3-node runs"
	case r.Nodes == 1:
		return "1 node"
	case r.ReadModels == 1:
		return fmt.Sprintf("%d nodes, 1 read model + %d workers", r.Nodes, r.Nodes-1)
	case r.ReadModels == r.Nodes:
		return fmt.Sprintf("%d nodes, all with read models", r.Nodes)
	}
	return fmt.Sprintf("%d nodes, %d read models", r.Nodes, r.ReadModels)
}

// cpuPerStep lists each node's CPU per cluster step.
func (r *ScaleRun) cpuPerStep() string {
	var out []string
	for _, nd := range r.NodeStats {
		out = append(out, nd.ID+" "+fdur(nd.CPUPerStep))
	}
	return strings.Join(out, " · ")
}

// lag lists each read model's lag at the window's end.
func (r *ScaleRun) lag(within time.Duration) string {
	var out []string
	for _, nd := range r.NodeStats {
		if !nd.ReadModel {
			continue
		}
		up := "applied them " + fdur(nd.CatchUp) + " later, the load going on"
		if nd.CatchUp < 0 {
			up = "had not applied them " + fdur(within) + " later, the load going on"
		}
		out = append(out, fmt.Sprintf("%s %s records behind, %s", nd.ID, fnum(float64(nd.Behind)), up))
	}
	return strings.Join(out, "; ")
}

// scaleRows are row 9: a line per cluster, and the curve.
func (r *Report) scaleRows() []row {
	s := r.Scale
	const what = "steps/s of a model-bound load on tah-node processes in CPU quotas"
	switch {
	case s == nil:
		return nil
	case s.NotRun != "":
		return []row{{"9", what, "", "not run: " + s.NotRun, "", "", "", ""}}
	}
	var out []row
	for _, x := range s.Runs {
		tgt, verdict := "", ""
		ratio := s.ratio(x)
		if t := x.target(); t > 0 {
			tgt = fmt.Sprintf("≥ %s× one node", trimFloat(t))
			verdict = metOr(ratio >= t, fmt.Sprintf("missed: %s×", trimFloat(round2(ratio))))
		}
		if x.Failed > 0 {
			verdict += fmt.Sprintf("; %d turns failed", x.Failed)
		}
		out = append(out, row{"9", fmt.Sprintf("steps/s, %s sessions (a tool step a turn), model answers in %s over HTTP; %s, %s CPU each (cgroups); CPU per cluster step: %s",
			fnum(float64(s.Sessions)), fdur(s.LLMDelay), x.layout(), trimFloat(x.Quota), x.cpuPerStep()),
			fmt.Sprintf("R%d; %s", x.Replicas, s.Durability), fnum(x.StepsPerSec) + "/s",
			fmt.Sprintf("model-bound %s/s; CPU-bound %s/s (quotas ÷ CPU per step: %s× one node's)", fnum(x.ModelBound), fnum(x.CPUBound), trimFloat(round2(s.cpuRatio(x)))),
			fratio(ratio) + " one node", tgt, verdict})
	}
	out = append(out, r.scaleFloorRows()...)
	if len(s.Curve) > 0 {
		var ns, rates, ratios []string
		for _, x := range s.Curve {
			ns = append(ns, fmt.Sprint(x.Nodes))
			rates = append(rates, fnum(x.StepsPerSec))
			ratios = append(ratios, trimFloat(round2(s.ratio(x)))+"×")
		}
		out = append(out, row{"9", fmt.Sprintf("the curve: steps/s on %s nodes of %s CPU each (1 read model + workers)", strings.Join(ns, " → "), trimFloat(s.Curve[0].Quota)),
			"R1; " + s.Durability, strings.Join(rates, " → ") + "/s", "", strings.Join(ratios, " → "), "", ""})
	}
	return out
}

// scaleDelay is row 9's model delay (the default when the row did not run).
func (r *Report) scaleDelay() time.Duration {
	if r.Scale != nil && r.Scale.LLMDelay > 0 {
		return r.Scale.LLMDelay
	}
	return Default().ScaleDelay
}

// scaleSizes is row 9's line of the sizes.
func (r *Report) scaleSizes(w func(string, ...any)) {
	z := r.Sizes
	w("| 9 | %s sessions, turns back to back for %s after a ramp, each a tool step (`%s`) and a final step; the model answers in %s over HTTP; each node a tah-node process in a cgroup of %s CPU; 1 node, then 3 at R1 and at R3 (one read model + workers, and all with read models)",
		fnum(float64(z.ScaleSessions)), fdur(z.ScaleDuration), scaleTool, fdur(r.scaleDelay()), trimFloat(z.ScaleQuota))
	if s := r.Scale; s != nil && len(s.Curve) > 0 {
		w("; the curve at %s CPU a node", trimFloat(z.ScaleCurveQuota))
	}
	w(" |\n")
}

// scaleTarget is row 9's line of the targets.
func (r *Report) scaleTarget(w func(string, ...any)) {
	s := r.Scale
	if s == nil {
		return
	}
	if s.NotRun != "" {
		w("- **Row 9, 3 nodes at least %s× one at R1 and %s× at R3**: not run here (%s).\n", trimFloat(targetScaleR1), trimFloat(targetScaleR3), s.NotRun)
		return
	}
	for _, x := range s.Runs {
		if t := x.target(); t > 0 {
			ratio := s.ratio(x)
			base, _ := s.baseRate(x)
			w("- **Row 9, 3 nodes (one read model + workers) at least %s× one node at R%d**: %s steps/s against %s (%s): %s×, %s.", trimFloat(t), x.Replicas,
				fnum(x.StepsPerSec), fnum(base), s.baseRuns(x), trimFloat(round2(ratio)), metOr(ratio >= t, "**missed**"))
			if f := s.floorOf(x); f != nil {
				w(" The NATS servers alone, in the same quotas at R3, allow %s steps/s: %s× one node, and TAH made %s%% of it.",
					fnum(f.StepsPerSec), trimFloat(round2(s.ratio(f))), trimFloat(round1(100*x.StepsPerSec/f.StepsPerSec)))
			}
			w("\n")
		}
	}
}

// baseRuns names the one-node runs behind r's ratio: "one node" or "the
// mean of one node's 700/s before and 650/s after".
func (s *ScaleResult) baseRuns(r *ScaleRun) string {
	bs := s.bases(r)
	if len(bs) < 2 {
		return "one node"
	}
	var rates []string
	for _, b := range bs {
		rates = append(rates, fnum(b.StepsPerSec)+"/s")
	}
	return "the mean of one node's " + strings.Join(rates, " before and ") + " after"
}

// scaleMethod says how row 9 is measured.
func (r *Report) scaleMethod(w func(string, ...any)) {
	w("9. **Nodes that add capacity.** Each node is a tah-node process of its own (this program again, `-tah-node`, as row 7's victim), confined to the same CPU quota by a cgroup v1 `cpu` controller (`cpu.cfs_quota_us` over a %s period; the node's command writes its pid to the cgroup's `cgroup.procs` before it execs the node), as if each were a small machine of its own; they share this machine's one disk, hence fsync every 2 minutes (with fsync always every node would wait on the same disk). Where no cgroup v1 `cpu` controller can be written (not root, a cgroup v2-only host) the row is skipped and says why. The model is an OpenAI-compatible server in this process (`llm/llmtest`'s encoding, streamed or not), answering every call after %s: a call of `%s` on the harness's small project when the conversation does not end with a tool's result, else a short answer. The sessions run in this process too, outside the quotas, through package `client`, one connection to each node's server (session *i* on node *i* mod *n*'s): each creates its session and takes a warm-up turn; once the partitions are shared and the streams placed (`bus`: at R1 each shard on the server of the node that runs its sessions, `TAH_IN` spread around them; at R3 each shard's leader and each input partition's consumer's leader off that server, and spread), every session runs turns back to back, and after a ramp the window is measured. Steps/s is the model's answered calls in the window over its length; the *model-bound* rate is every session waiting only for its model. A node's CPU is its process's user + system time (`/proc/<pid>/stat`) over the window, and its CPU per cluster step that over every step the cluster took. The placement is each stream's server (R1) or leader (R3) at the window's end; a read model's lag is the records of the log (each shard's last sequence) its `data.db` had not applied at the window's end (its `positions` table, read from this process) and how long it then took to apply them. Three nodes run in the recommended layout (`read_model=false` on all but n0: one read model and workers, docs/operations.md) and, for comparison, each with its read model; at R3 as at R1 the ratio is over the one node (a single server holds one replica), run twice, before the three-node runs and after them: the ratio is over the mean of the two, so that a machine that drifts (busier or quieter) meanwhile moves both halves of it alike, and the two say how far it drifted. The *CPU-bound* rate is the nodes' quotas over the cluster's CPU per step: what the nodes would make if each got its whole quota, which a node on a shared machine may not (each node's CPU busy is in the analysis). The machine is shared with other work (its load average is in each run's line): the figures are indicative.\n",
		fdur(cfsPeriod), fdur(r.scaleDelay()), scaleTool)
}

// scaleAnalysis explains row 9: each run's nodes, their CPU, the streams
// they hold and their read models' lag.
func (r *Report) scaleAnalysis(w func(string, ...any)) {
	s := r.Scale
	if s == nil || s.NotRun != "" {
		return
	}
	w("### Nodes in CPU quotas: what each adds\n\n")
	for _, x := range append(append(append([]*ScaleRun{}, s.Runs...), s.Floor...), s.Curve...) {
		what := fmt.Sprintf("%s turns, %d failed", fnum(float64(x.Turns)), x.Failed)
		if x.Floor {
			what = fmt.Sprintf("%d appends failed", x.Failed)
		}
		w("- %s, R%d, %s CPU each: %s steps/s (%s× one node; %s), %s of CPU per cluster step over all nodes", x.layout(), x.Replicas, trimFloat(x.Quota),
			fnum(x.StepsPerSec), trimFloat(round2(s.ratio(x))), what, fdur(x.CPUPerStep))
		w(" (CPU-bound %s/s, %s× one node's; the clients and the model, outside the quotas, %.2f CPU busy; load average %s)", fnum(x.CPUBound), trimFloat(round2(s.cpuRatio(x))), x.ClientCPUs, x.LoadAvg)
		var nodes []string
		for _, nd := range x.NodeStats {
			role := "worker"
			if nd.ReadModel {
				role = "read model"
			}
			nodes = append(nodes, fmt.Sprintf("%s (%s) %s a step, %.2f of its %s CPU busy, throttled %s", nd.ID, role, fdur(nd.CPUPerStep), nd.Busy, trimFloat(x.Quota), fdur(nd.Throttled)))
		}
		w(": %s. Streams (held at R1, led at R3): %s", strings.Join(nodes, "; "), placementOf(x))
		if !x.Balanced {
			w(" (not placed when the window began)")
		}
		if l := x.lag(s.CatchUpWithin); l != "" {
			w(". Read models: %s", l)
		}
		if x.FirstFailure != "" {
			w(". First failed turn: %s", x.FirstFailure)
		}
		w(".\n")
	}
	r.scaleFloorAnalysis(w)
	w("\n*Measured here for the first time* (changes of 2026-12-05, after the run before this one): a `perf` profile of the three nodes at R3 (one read model + workers) put nats-server's flush of the input consumers' state (`consumerFileStore.flushLoop`: a state file written again up to ten times a second for each of the 16 partitions' consumers, on each of 3 replicas) at 8.6%% of their CPU. `TAH_IN` is a work queue, so the stream alone says what is left to do, and replicated consumers now keep their state in memory (on each replica; since, at R1 too, where the node pulling a partition makes its consumer again if a restart of the server's JetStream took it: 8.7%% of the CPU of the R1 node holding `TAH_IN` and 4–5%% of one node's in this row): in runs side by side of this row at R3, 701 → 923 steps/s and 2 → 1.59 ms of CPU per cluster step. The same profiles of a worker found the built-in tools' descriptions and schemas made afresh at every step (4%% of its CPU: now once per tool and limits) and a 64 KB buffer made and zeroed for every model answer read (5%%: now pooled); this row's spread from run to run on this machine (±20%%: 2.18× and 2.55× at R1 in two runs back to back) hides changes of that size.\n")
	w("\n*Done since* (2026-12-07, a `perf` profile of the three nodes at R3, one read model + workers, before this run): among TAH's own parts, `list_files` (this row's tool) was 5%% of the nodes' CPU, a third of it system calls its guard repeated (two `Lstat`s an entry, the root's ancestors looked at for each path checked): now one an entry and the ancestors once a call (`go test -bench ListFiles ./tools/builtin`: 166–206 to 131–143 µs); a node read every input that had ended in the last 16 s for each new input (0.8%%): now it drops the oldest in order; a turn's definition (every tool's schema encoded and hashed, 1%%) is made again only when its parts change; each request encoded the session's tools again around the memo's messages (0.7%%): now once (`go test -bench Body ./llm/openai`: 38–44 to 31–33 µs); a token delta's body and headers cost half (`go test -bench DeltaPublish ./bus`: 2.03 to 1.07 µs). About 5%% of a cluster step's CPU by the profile's shares, under this row's spread from run to run on this machine; in runs of this row (without its curve and floor) alternating this build and the one of the run before this one (eca4e5e), two of each: one node 494–526 to 558–564 steps/s (0.92–1.02 to 0.87–0.91 ms of CPU a step), three nodes at R1 (one read model + workers) 1,237–1,404 to 1,192–1,329 steps/s, at R3 800–833 to 1,057–1,060 (1.77–1.83 to 1.38 ms of CPU a cluster step): the ratio at R3 went from 1.52–1.69 to 1.87–1.90, and at R1 from 2.35–2.84 to 2.11–2.38, one node having gained more than three. What the profile leaves: nats-server, 40%% of the nodes' CPU (Raft, routes and stores: at R3 a shard's leader is kept off the server of the node that appends to it, so that the node's death does not take the leader its sessions need, row 7, and each append crosses a route), the read model's projector on its node, and the HTTP client of the model calls (6%%). A census of one turn's messages (a tool step and an answer, one node) found nothing to drop: the input, its delivery and acknowledgement, three records and their acknowledgements, their deliveries to the read model, and a token delta a step.\n")
	w("\nA node's CPU per cluster step is its CPU over every step taken anywhere in the cluster: a worker's falls as nodes are added, while a read-model node keeps paying for every step it projects. When the nodes' CPU busy stays below their quota the machine, not the quota, bounded the run (the bench's clients and model and any other work share its %d cores), and the CPU-bound rate is the better guide to what separate machines would make.\n\n", r.Machine.CPUs)
}

// floorOf is the floor run of as many servers as run r has nodes, for a
// run at R3 (nil when there is none).
func (s *ScaleResult) floorOf(r *ScaleRun) *ScaleRun {
	if r.Replicas < 3 {
		return nil
	}
	for _, f := range s.Floor {
		if f.Nodes == r.Nodes && f.Quota == r.Quota {
			return f
		}
	}
	return nil
}

// floorRecords lists the floor's turn: each record's events and size.
func (r *ScaleRun) floorRecords() string {
	var out []string
	for _, x := range r.FloorRecords {
		out = append(out, fmt.Sprintf("%s %s B", x.Events, fnum(float64(x.Bytes))))
	}
	return strings.Join(out, ", ")
}

// scaleFloorRows are row 9's floor: a line per server count, with TAH's
// rate at R3 on as many nodes as a share of it.
func (r *Report) scaleFloorRows() []row {
	s := r.Scale
	var out []row
	for _, f := range s.Floor {
		var tah []string
		for _, x := range s.Runs {
			if s.floorOf(x) == f {
				tah = append(tah, fmt.Sprintf("TAH (%s) %s/s, %s%% of it", x.layout(), fnum(x.StepsPerSec), trimFloat(round1(100*x.StepsPerSec/f.StepsPerSec))))
			}
		}
		verdict := ""
		if ratio := s.ratio(f); f.Nodes == 3 && ratio > 0 && ratio < targetScaleR3 {
			verdict = fmt.Sprintf("the floor is %s× one node: ≥ %s× at R3 is beyond what 3 servers allow", trimFloat(round2(ratio)), trimFloat(targetScaleR3))
		}
		if f.Failed > 0 {
			verdict = strings.TrimPrefix(verdict+fmt.Sprintf("; %d appends failed", f.Failed), "; ")
		}
		out = append(out, row{"9", fmt.Sprintf("the floor: steps/s the NATS servers alone allow at R3, %d tah-node servers running no session (no read model), %s CPU each (cgroups); a turn's records (%s) appended back to back by %s writers outside the quotas, two steps a turn; the servers' CPU per step: %s (CPU-bound %s/s)",
			f.Nodes, trimFloat(f.Quota), f.floorRecords(), fnum(float64(s.Sessions)), f.cpuPerStep(), fnum(f.CPUBound)),
			"R3; " + s.Durability, fnum(f.StepsPerSec) + "/s", joinOr(tah, "TAH not run on as many nodes at R3"),
			fratio(s.ratio(f)) + " one node", "", verdict})
	}
	return out
}

// scaleFloorAnalysis says what the floor shows: whether the R3 target is
// within what the servers allow, TAH's share of it, and whether more
// servers than replicas add to it.
func (r *Report) scaleFloorAnalysis(w func(string, ...any)) {
	s := r.Scale
	var three, more *ScaleRun
	for _, f := range s.Floor {
		switch {
		case f.Nodes == 3 && three == nil:
			three = f
		case f.Nodes > 3 && more == nil:
			more = f
		}
	}
	if three == nil {
		return
	}
	w("\n**The floor at R3.** At R3 every server stores every record and takes part in the Raft group of every stream, so that work grows with the cluster's traffic, not with a node's share of it. The floor measures it alone: the same tah-node processes in the same quotas, every one a worker running no session (their embedded servers are what the quotas hold), and this process appending a turn of the row's records (%s), each by one fenced append as a node makes it, from %s writers spread over the servers. ",
		three.floorRecords(), fnum(float64(s.Sessions)))
	ratio := s.ratio(three)
	w("Three servers allowed %s steps/s, %s× one node's rate at R1, the servers spending %s of CPU a step between them (%s busy of their %s CPU each: %s; CPU-bound %s/s, %s× one node's). ",
		fnum(three.StepsPerSec), trimFloat(round2(ratio)), fdur(three.CPUPerStep), busyOf(three), trimFloat(three.Quota), three.cpuPerStep(), fnum(three.CPUBound), trimFloat(round2(s.cpuRatio(three))))
	if maxBusy(three) < 0.9*three.Quota {
		w("The servers did not reach their quotas: the machine (load average %s) bounded the measure, which is then a lower bound of the floor, and the CPU-bound rate is what the quotas would allow. ", three.LoadAvg)
	}
	switch {
	case ratio <= 0:
	case ratio < targetScaleR3:
		w("**The floor is below the target**: NATS alone at R3 on three servers in these quotas cannot make %s× one node, whatever TAH does on top; the target the floor allows is at most %s×. ", trimFloat(targetScaleR3), trimFloat(round2(ratio)))
	default:
		w("The floor is above the target (%s×): the servers' own work at R3 does not make it impossible; what keeps TAH below it is its own work on top. ", trimFloat(targetScaleR3))
	}
	for _, x := range s.Runs {
		if s.floorOf(x) == three {
			w("TAH on three nodes at R3 (%s) made %s%% of the floor. ", x.layout(), trimFloat(round1(100*x.StepsPerSec/three.StepsPerSec)))
		}
	}
	w("The floor leaves out the rest of what the servers do for TAH at R3 (the inputs in `TAH_IN` and their acknowledgements, each a Raft entry of an R3 consumer, the checkpoints, the read model's reads), so the true floor is lower. ")
	if more != nil {
		scales := "storage scales with more servers than replicas (each server holds 3 of every %d replicas)"
		if more.CPUBound < three.CPUBound*1.2 {
			scales = "storage did not scale here, although each server holds 3 of every %d replicas"
		}
		w("With %d servers (more than the replicas), the busiest server's CPU per step went from %s to %s and the CPU-bound floor from %s to %s steps/s (%s×): "+scales+". Measured, the floor was %s steps/s (%s× three servers'), the servers %s busy of their %s CPU: ",
			more.Nodes, fdur(maxNodeCPU(three)), fdur(maxNodeCPU(more)), fnum(three.CPUBound), fnum(more.CPUBound), trimFloat(round2(more.CPUBound/three.CPUBound)), more.Nodes,
			fnum(more.StepsPerSec), trimFloat(round2(more.StepsPerSec/three.StepsPerSec)), busyOf(more), trimFloat(more.Quota))
		w("their quotas sum to %s CPUs on this machine's %d cores, shared with this process and other work (load average %s), so the machine, not the quotas, bounds what is measured there.",
			trimFloat(float64(more.Nodes)*more.Quota), r.Machine.CPUs, more.LoadAvg)
	}
	w("\n")
}

// busyOf lists a run's nodes' CPUs busy.
func busyOf(r *ScaleRun) string {
	var out []string
	for _, nd := range r.NodeStats {
		out = append(out, fmt.Sprintf("%.2f", nd.Busy))
	}
	return strings.Join(out, " · ")
}

// maxNodeCPU is the CPU per step of a run's busiest node.
func maxNodeCPU(r *ScaleRun) time.Duration {
	var m time.Duration
	for _, nd := range r.NodeStats {
		m = max(m, nd.CPUPerStep)
	}
	return m
}

// maxBusy is the CPUs busy of a run's busiest node.
func maxBusy(r *ScaleRun) float64 {
	var m float64
	for _, nd := range r.NodeStats {
		m = max(m, nd.Busy)
	}
	return m
}
