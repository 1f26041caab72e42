package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tah-dev/tah/wire"
)

// markdown is docs/benchmarks.md: the machine, the sizes, the table, how
// each row is measured, and what the figures mean. It is written by the
// program so that the prose and the numbers always come from the same run;
// the few figures of diagnostic runs (profiles) are marked as such.
func (r *Report) markdown(table string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	w("# Benchmarks\n\n")
	w("Written by `make bench` (`cmd/tah-bench` over package `bench`, see `go run ./cmd/tah-bench -h`) on %s; the run took %s. Do not edit it by hand: run `make bench` again.\n\n", m.Date, fdur(r.Took.Round(time.Second)))
	w("TAH's overhead must stay close to the durable writes it cannot avoid. These machines are noisy (here, the latency of one fsync varied by a factor of two between runs), so every figure stands beside a **floor measured in the same run, on the same node**, and the targets are ratios. The raw data is in [benchmarks.json](benchmarks.json).\n\n")

	w("## Machine\n\n| CPUs | CPU (/proc/cpuinfo) | memory | kernel | Go | load average at start / end |\n|---|---|---|---|---|---|\n| %d | %s | %s | %s | %s | %s / %s |\n\n", m.CPUs, m.CPU, m.MemTotal, m.Kernel, m.Go, m.LoadAvgStart, m.LoadAvgEnd)
	w("Rows 1–6, 8, 10, 11 and 12 run one node of the cluster harness (`tahtest`) in this process, as a single node runs: the embedded nats-server (JetStream, file store in a temporary directory), the node (`node.Start` and its API: the session actors, the tool runner, the input consumers, the projector and its SQLite read model) and `llm/mock`. The sessions are driven the way every client drives them, through package `client`, over a connection of its own: `client.Run` subscribes to what the input causes (the outcome's reply subject and the session's input errors: a `Turn` asked only for its outcome follows no log), then publishes the `run` input to `TAH_IN`; the outcome is what the `Turn` reports. The client runs in the same process, on the same cores as the node. Row 7 runs three nodes, row 9 clusters of tah-node processes.\n\n")

	s := r.Sizes
	w("## Sizes of this run\n\n")
	if s.Quick {
		w("**A `-quick` smoke run: every size is scaled down; these are not the issue's sizes.**\n\n")
	}
	w("| row | size |\n|---|---|\n")
	reported := "the median reported"
	if s.StepCPUMean {
		reported = "the median of the times reported, the mean of the CPU and the allocations (a garbage collection lands on some turns only)"
	}
	w("| 1–2 | one session; turns of %d tool calls and a final answer (%d LLM steps); %d turns measured, %s, after one warm-up turn; then as many rounds (after a warm-up round) of a turn with tracing on and one with it off, each on the node started again |\n", s.StepToolCalls, s.StepToolCalls+1, s.StepTurns, reported)
	w("| 3 | %s sessions at once (the issue's size%s); %d steps a turn; the mock answers after %s; %d measured turn(s) each after a warm-up turn; session *i* starts *i*/%s of an LLM call late, so that they do not write in lockstep |\n",
		fnum(float64(s.LoadSessions)), scaledNote(s.LoadSessions, 1000), s.LoadSteps, fdur(s.LoadDelay), s.LoadTurns, fnum(float64(s.LoadSessions)))
	w("| 4 | histories of %s events (turns of 20 LLM steps, about 100 events each), interleaved with %s other sessions of one turn each (five LLM steps, about 26 events); context budget %s characters; %d resumes per length, each on a node started afresh |\n",
		joinInts(s.ResumeEvents), fnum(float64(s.ResumeOthers)), fnum(float64(s.ResumeBudget)), s.ResumeRepeats)
	w("| 5 | %s tokens in LLM steps of 100, %s apart |\n", fnum(float64(s.DeltaTokens)), fdur(s.DeltaPace))
	w("| 6 | %s sessions (the issue's size%s) |\n", fnum(float64(s.MemSessions)), scaledNote(s.MemSessions, 10000))
	if s.FailoverSessions > 0 {
		w("| 7 | three nodes of the harness, R3 (each with its embedded server, joined by routes), `bus.Default()`'s failover timings; the node killed is a tah-node process of its own (`-failover-kill process`, the default) or a node in this process (`-failover-kill shutdown`), the others run in this process; %d sessions of the killed node with a turn in flight (their inputs sent spread over one keep-alive period), and %d of its idle sessions (one finished turn there) sent an input right after the kill |\n", s.FailoverSessions, s.FailoverSessions)
	}
	w("| 8 | turns of %d tool steps, %d measured after a warm-up, TAH, LangGraph.js and Restate one after the other%s |\n", s.PeerSteps, s.PeerTurns, r.peerSessionsSize())
	r.scaleSizes(w)
	if s.UISessions > 0 {
		w("| 10 | %s sessions (the issue's size%s), one of them of %s steps (the issue's size%s: turns of 99 tool steps and an answer) |\n", fnum(float64(s.UISessions)), scaledNote(s.UISessions, 10000), fnum(float64(s.UISteps)), scaledNote(s.UISteps, 1000))
	}
	if a := r.Agent; a != nil {
		w("| 11 | %d turns of each of four paths after a warm-up turn each way, the paths taking turns: prompts to the agent protocol's controller (each a new session), prompts to one session's instance, and the same two through `client.Run`; the model streams one answer of %d tokens a turn, the first %s after its call began, then one every %s |\n",
			s.AgentPrompts, a.Tokens, fdur(a.FirstToken), fdur(a.Pace))
	}
	w("\n")

	w("## Results\n\n")
	w("*Floor*: the same work done by the primitives alone, in the same run. *Ratio*: TAH over the floor (for throughput: TAH's share of the model-bound and of the disk-bound rates).\n\n")
	b.WriteString(table)
	w("\n")

	r.targets(w)
	r.methods(w)
	r.analysis(w)
	r.proposals(w)

	w("## Reproduce\n\n")
	w("```\nmake bench                          # everything, the issue's sizes; writes docs/benchmarks.{md,json}\ngo run ./cmd/tah-bench -quick -out \"\"       # a smoke run of every row, the table on stdout\ngo run ./cmd/tah-bench -rows 2 -steps 500   # one row, other sizes (see -h)\n```\n\n")
	w("Diagnostics used for the analysis above: `-cpuprofile FILE` (the whole run), `-cpuprofile-load FILE` (row 3's measured turns only; with `-blockprofile-load` it also writes FILE.mutex and FILE.block, whose recording the CPU profile then counts), `-pause-read-model` (rows 2–3 without the read model during the measured turns), `-memprofile FILE` (row 6, the heap after passivation), `-log FILE` (the harness's log of every row, row 7's nodes' included). Read the profiles with `go tool pprof`.\n")
	return b.String()
}

func scaledNote(n, issue int) string {
	if n == issue {
		return ""
	}
	return fmt.Sprintf(" is %s: scaled", fnum(float64(issue)))
}

func joinInts(v []int) string {
	var s []string
	for _, n := range v {
		s = append(s, fnum(float64(n)))
	}
	return strings.Join(s, ", ")
}

// analysis explains the figures and the misses, with the numbers of this
// run.
func (r *Report) analysis(w func(string, ...any)) {
	w("## Why\n\n")
	r.stepAnalysis(w)
	r.resumeAnalysis(w)
	r.loadAnalysis(w)
	r.scaleAnalysis(w)
	if d := r.Delta; d != nil {
		w("### Token deltas\n\nA delta goes from the provider's callback to a core NATS publish on the node's connection, then over TCP to the subscriber: %s at p50, where the raw publish on the same path costs %s. Most of either is the wake-ups of an idle two-core virtual machine (tokens %s apart), not TAH. The first token of each LLM step comes %s after the provider made it at p50 (no append precedes it: `llm.streaming` is no longer written).\n\n",
			fdur(d.P50), fdur(d.FloorP50), fdur(d.Pace), fdur(d.FirstP50))
	}
	if mm := r.Memory; mm != nil {
		w("### Memory\n\nAt %s sessions the node's resident memory grew by %s per session while every actor was alive, and %s per session once all had passivated (Go heap: %s and %s). An active session adds its actor, its folded state, its writer and its idle timer (no goroutine: %d goroutines with every actor alive, %d without). What stays after passivation is mostly the embedded server's: the shards' index of every subject (one per session, `%s` in shard 0), the duplicate-detection window (the Msg-Id of every append is kept for two minutes, so this part is transient) and Go maps that keep their size after deletes (protoactor's process registry, the Manager's actor map).\n\n",
			fnum(float64(mm.Sessions)), fbytes(int(mm.PerActive)), fbytes(int(mm.PerPassive)), fbytes(int(mm.HeapPerActive)), fbytes(int(mm.HeapPerPassive)), mm.GoroutinesActive, mm.GoroutinesPassive,
			wire.ShardSubject(0, "<sid>"))
		if mm.ClientConsumers > 0 {
			w("**The client's turns left %s consumers of the log's shards on the server** when the build ended, counted as the sessions' memory: a `Turn` asked only for its outcome should leave none (problem 12).\n\n",
				fnum(float64(mm.ClientConsumers)))
		}
	}
	r.failoverAnalysis(w)
	r.peerAnalysis(w)
	r.agentAnalysis(w)
	r.tenantsAnalysis(w)
}

// resumeAnalysis explains row 4.
func (r *Report) resumeAnalysis(w func(string, ...any)) {
	rs := r.Resume
	if rs == nil || len(rs.Lengths) == 0 {
		return
	}
	w("### Resume: a checkpoint is a window of the history\n\n")
	w("| events | first LLM call | checkpoint | messages in it / elided | events it covers | events replayed | checkpoint decode | load (get, decode, replay, fold) | end of the turn | the whole state |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range rs.Lengths {
		w("| %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s |\n", fnum(float64(l.Events)), fdur(l.FirstCall), fbytes(l.CheckpointBytes),
			fnum(float64(l.WindowMessages)), fnum(float64(l.ElidedMessages)), fnum(float64(l.CheckpointEvents)),
			fnum(float64(l.Tail)), fdur(l.CheckpointDecode), fdur(l.Load), fdur(l.TurnEnd), fbytes(l.StateBytes))
	}
	first, last := rs.Lengths[0], rs.Lengths[len(rs.Lengths)-1]
	if first.ClientRun > 0 {
		w("\nThe first LLM call is counted from `client.Run`, which itself took %s at the shortest history and %s at the longest (two subscriptions and the input's publish, acknowledged once stored): the client's work, which does not grow with the history.\n", fdur(first.ClientRun), fdur(last.ClientRun))
	}
	w("\nThe checkpoint (`actors/session/history.go`) holds a window of the history: the turns no request can send any more (those before the newest summary, or those the context rules drop whatever they hold: the turns after them outweigh the budget twice over, their old tool outputs omitted) are stored once, in segments of the checkpoint bucket, and left out with counts (`projection.Elided`) that let the rules run as if they were there, so that the request is the whole history's byte for byte (`projection.FuzzWindow`); the finished turns' steps and tool calls are dropped (`State.Slim`). At %s events the checkpoint is %s where the whole state is %s; decoding it takes %s, against %s at %s events. The segments are read back only for a compaction, or a request the window cannot make (a larger budget). What still grows is the load's replay of the tail (%s at the longest history, %s at the shortest): the server finds the session's records after the checkpoint in its shard.\n\n",
		fnum(float64(last.Events)), fbytes(last.CheckpointBytes), fbytes(last.StateBytes), fdur(last.CheckpointDecode), fdur(first.CheckpointDecode), fnum(float64(first.Events)),
		fdur(last.Load), fdur(first.Load))
}

// proposals lists the problems found in other packages and their fixes.
func (r *Report) proposals(w func(string, ...any)) {
	w("## Problems found, and proposed fixes\n\n")
	w("Each names where, how much, and a fix; the state of each as of this run is said where part of it was fixed.\n\n")
	w("1. **`llm.started` recorded the whole request, and a step made five fsynced appends** (measured before issue 15: a step cost about 10× one fenced append, a long session's events grew with the square of its length). *Fixed*: the request by reference (`llm.started` records what rebuilds it and its SHA-256; `tools.offered` the schemas), records of several events, two durable writes per LLM+tool step, `llm.streaming` gone.\n")
	w("2. **The checkpoint grew with the history** (`actors/session/actor.go` `checkpoint`: the JSON of the actor's `projection.State`, every message and step). *Fixed*: the checkpoint is a window of the history, the rest in segments, and the past turns' steps are dropped (row 4).\n")
	w("3. **The actor decoded what it had just encoded** (`actors/session/context.go` `AgentContext.Append` → `projection.Apply` → `event.Event.Decode`), and the writer re-validated and compacted a payload produced by `json.Marshal` (`event.EncodeRecord`, from `bus/append.go` `message`). *Fixed*: the owner folds the payload it holds (`projection.ApplyTyped`: `event.Event.Typed` decodes only a payload that its encoding would change, such as a string that is not UTF-8; `TestApplyTypedAsApply` folds every event type both ways), and `event.EncodeRecord` builds the body around each payload, through `json.Marshal` only for one that is not already as Marshal writes it (`TestEncodeRecordAsMarshal`: the old body, byte for byte, for every event type). Row 2 gives the figures, and the floor the server and its client set for the same appends.\n")
	w("4. **The read model's cache was smaller than the active sessions** (`store.Options.CacheSize`, then 256; `node.Start` opens the store with the defaults). Above 256 active sessions almost every batch reloaded and refolded sessions: under row 3 the projector took a third of the CPU, `store.loadState` 22%%. *Fixed*: the default is now 2048. *Still to do*: size it from the node's configuration, and group a batch's events by session before loading.\n")
	w("5. **One NATS connection carries the whole node** (`bus.Open`): every session's appends, the checkpoint puts, the delta publishes and the projector's consumer share one `nats.Conn` and its mutex. *Fixed*: a pool of connections in `bus` (`bus/pool.go`, `nats.conns`, by default the cores within 2..8): shard k's appends, its atomic batches and its sessions' deltas go on connection k mod conns (a session's appends stay in order on one), the tails on one of their own, the control traffic on the main one. Row 3's sampled lock waits fell by about 60%% with two of them (a 2-core machine at load 8, the same run of both builds); what holds a connection's lock now is mostly its flusher, whose write to the embedded server's in-process pipe waits for the server's read loop of that connection. *Still to do*: on this shared machine row 3 got about 0.4–0.7 of a core, and the steps/s of both builds were within the noise of each other: the rate there is bound by the CPU a step costs, not by the lock.\n")
	w("6. **A checkpoint at the end of every turn** (`actors/session/actor.go` `next`), even of a five-event turn: a KV put of the whole state and an append, 11%% of the connection's lock waits under row 3. *Fixed*: a checkpoint is written once `CheckpointEvery` (64) events piled up since the last one, as its documentation said; a resume replays at most that and one turn.\n")
	w("7. **`bus.Input.Options.MaxSteps` was never read** (`node/input.go` `handleInput`): the wire contract offered a per-turn maxSteps that the node ignored. *Fixed*: the run command carries it, `turn.started` records it (`max_steps`), the loop applies it, and `tahctl send --max-steps N` sends it.\n")
	r.failoverProposals(w)
	r.clientProposals(w)
	w("\n")
}

// failoverTarget is row 7's line in the targets.
func (r *Report) failoverTarget(w func(string, ...any)) {
	f := r.Failover
	if f == nil || f.NotMeasured != "" {
		w("- **Row 7 (failover)**: not measured in this run.\n")
		return
	}
	w("- **Row 7, a dead node's sessions going on elsewhere within %s at p50 and %s at most** (the scale issue's and the cluster issue's, with the default timings): the slowest of the %d turns in flight on the killed node made its next LLM call on a survivor %s after the kill (p50 %s): %s.",
		fdur(targetFailoverP50), fdur(targetFailover), f.Running, fdur(f.RunningMax), fdur(f.RunningP50), f.verdict())
	if f.Kill == KillShutdown {
		w(" The kill here is the shutdown of the node's embedded server in this process, which hands the server's Raft leaderships over before it goes; a real kill -9 does not, and in diagnostic runs the slowest turn then went on after up to 9.99 s: met, by a hair (see *Failover* under *Why*).")
	}
	if len(f.Problems) > 0 {
		w(" **%d correctness checks failed** (listed under *Why*).", len(f.Problems))
	}
	w("\n")
	r.failoverCutTarget(w)
}

// failoverAnalysis explains row 7's times, and what else the run showed.
func (r *Report) failoverAnalysis(w func(string, ...any)) {
	f := r.Failover
	if f == nil || f.NotMeasured != "" {
		return
	}
	keep := f.InputAckWait / 3
	w("### Failover: the dead node's silence, then NATS's leader elections\n\n")
	w("The other nodes take a killed node for dead on what the NATS servers saw (node/presence.go: a server's disconnect advisory for its connection, or the loss of the routes to its embedded server whose port then refuses connections; the signal of this run is below), and otherwise from a silence: every node publishes its presence on core NATS every NodeTTL/5 (%s), and the others take it for dead once they have not heard it for NodeTTL (%s), which they check every NodeTTL/5. A survivor had last heard the victim %s before the kill, so the silence alone would take it over from %s after it. They then pull its partitions; the server moves a partition to them once its pin on the dead node has expired, InputPinnedTTL (%s) after the dead node's last pull (it pulled again every %s, so the pins expire about when the survivors notice), and once the partition's consumer has a leader. ",
		fdur(f.NodeTTL/5), fdur(f.NodeTTL), fdur(f.HeartbeatAge), fdur(max(f.NodeTTL-f.HeartbeatAge, 0)), fdur(f.InputPinnedTTL), fdur(max(f.InputPinnedTTL/3, time.Second)))
	w("An input sent after the kill to one of the dead node's idle sessions waits for just that: its first LLM call came %s after the kill at p50, %s at most (the inputs' publishes, which `client.Run` tries again while `TAH_IN` has no leader, were acknowledged within %s of the kill).\n\n",
		fdur(f.IdleP50), fdur(f.IdleMax), fdur(f.PublishMax))
	w("A turn in flight is resumed as soon as a survivor takes its partition: the node taking partitions over resumes the sessions its read model shows with an open turn there (it loads the session from the log, claims it with a newer epoch and asks the model again for the step the dead node had started). Without that, the turn would wait for its input, which the dead node had kept alive with InProgress every InputAckWait/3 (%s): the server delivers it again InputAckWait (%s) after the last renewal, between %s and %s after the kill; the input, when it comes, is recognised as done. Measured: %s after the kill at p50, %s at most. What remains is the dead node's detection (NodeTTL) and, when its server led the session's shard of the log (`TAH_EVT_<k>`), that stream's leader election.\n\n",
		fdur(keep), fdur(f.InputAckWait), fdur(f.InputAckWait-keep), fdur(f.InputAckWait), fdur(f.RunningP50), fdur(f.RunningMax))
	w("The killed node's server led %d of the %d streams (%s) and %d of the %d consumers%s. Every turn then finished (the last %s after the kill), on %s. The survivors' presence listed every partition between them, each once, %s after the kill.\n\n",
		f.VictimStreamsLed, f.Streams, joinOr(f.VictimStreams, "none"), f.VictimConsLed, f.Consumers, map[bool]string{true: ", and the meta group", false: ""}[f.VictimMetaLeader],
		fdur(f.Finished), takenBy(f.TakenBy), fdurOr(f.Rebalanced, fmt.Sprintf("not within %s", fdur(presenceWindow))))
	if f.DoubleMax > 0 {
		w("**Both survivors pulled the same partitions for a while.** From %s to %s after the kill, both survivors' presence listed up to %d partitions each: one took the other for dead. The pins keep each partition delivered to one node at a time, but the one that hands partitions back stops the sessions it had started of them.\n\n",
			fdur(f.DoubleFrom), fdur(f.DoubleUntil), f.DoubleMax)
	}
	if len(f.SurvivorFences) > 0 {
		var at []string
		for _, x := range f.SurvivorFences {
			at = append(at, fmt.Sprintf("%s at %s", x.Node, fdur(x.After)))
		}
		w("**The survivors fenced themselves** (stopped all their sessions, as a node cut off from NATS does): %s after the kill.\n\n", strings.Join(at, ", "))
	}
	if f.Kill == KillShutdown {
		w("**A real kill -9 is slower.** This run shut the node's server down in this process (`server.Shutdown`), and nats-server's Shutdown first steps down every Raft group its server leads, so the survivors had new leaders within milliseconds. A process killed with SIGKILL steps down nothing: each stream and consumer it led waits for an election, which nats-server starts 4 to 9 s after the leader's last heartbeat. Twelve diagnostic runs with `-failover-kill process` (the victim a process of its own, sent SIGKILL; this machine, the same sizes; three of them with `-failover-lead` moving `TAH_EVT` or `KV_tah_checkpoints` to the victim first; the code of commits e839b92 to 16937fc, after presence moved to core NATS) found:\n\n")
		w("- the turns in flight went on after at most 7.8 to 10.0 s (p50 6.6–7.3 s): the target met in every run, but the slowest, 9.99 and 9.59 s, came within half a second of it. Those were partitions whose consumer the dead server led: the partition could be pulled only after its consumer's election (7.9 and 8.3 s after the kill), and `membership.rebalance` had meanwhile tried `InputConsumer.Add` of it and waited out each try's 2 s timeout (\"partition not pulled … context deadline exceeded\"): a request to a leaderless consumer gets no answer at all, so a try begun just before the election still failed 2 s later;\n")
		w("- inputs to the dead node's idle sessions: p50 4.5–8.4 s, and in one run half of them only after 36.8 s: they reached a survivor while `TAH_EVT` had no leader, and loading their session waited out a 30 s deadline on the stream's last-sequence request (\"input put back: the session's log is unavailable … replay session …: last sequence: context deadline exceeded\", 34.7 s after the kill), although the stream had a new leader 5 s after the kill. In another run, of an earlier build, none of them was served within 75 s, its logs not saying why;\n")
		w("- when the dead server led `TAH_IN` (5 runs of 12), clients could not send inputs until its election, up to 6.3 s after the kill: publishes failed with \"no response from stream\" or got no answer at all (a try with a 20 s deadline waited 20 s);\n")
		w("- no survivor fenced itself. Runs before presence moved to core NATS saw both survivors fence themselves when the dead server led the stream of `tah_nodes`, and the slowest turn go on after 15 to 18 s.\n\n")
	}
	if len(f.Problems) > 0 {
		w("**Correctness checks that failed in this run:**\n\n")
		for _, p := range f.Problems {
			w("- %s\n", p)
		}
		w("\n")
	}
	w("Signal in this run: %s (what the survivors' logs said: %s). The survivors' loads of a session timed out %d times after the kill (a session's checkpoint or records read while its shard had no leader).\n\n", f.Signal, signalsText(f.Signals), f.ReadTimeouts)
	r.failoverCutAnalysis(w)
	if c := r.FailoverCut; c != nil && len(c.Problems) > 0 {
		w("**Correctness checks that failed in the cut-off case:**\n\n")
		for _, p := range c.Problems {
			w("- %s\n", p)
		}
		w("\n")
	}
}

func joinOr(v []string, none string) string {
	if len(v) == 0 {
		return none
	}
	return strings.Join(v, ", ")
}

func fdurOr(d time.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	return fdur(d)
}

func takenBy(m map[string]int) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(s, ", ")
}

// failoverProposals are the problems row 7 found.
func (r *Report) failoverProposals(w func(string, ...any)) {
	if f := r.Failover; f == nil || f.NotMeasured != "" {
		return
	}
	w("8. **A turn in flight on a dead node waited for the whole ack wait** (`bus.InputMsg.KeepAlive` renews every InputAckWait/3; the server redelivers InputAckWait after the last renewal): 5.3 to 8 s after the kill. *Fixed*: a node that takes partitions over resumes at once the sessions the read model shows with an open turn there (`node/cluster.go` `resumeOpenTurns`); and (2026-12-07) when the node was taken for dead on the servers' word, the taker resets each partition's consumer to its ack floor before unpinning it (`bus.InputConsumer.TakeOver`, JetStream's consumer reset), so the dead node's inputs come at once too: a turn no read model showed open (its first record in flight at the kill, or a cluster of workers only) goes on as fast, and a resumed turn's input waits for it and is recognised as done.\n")
	w("9. **Pulling a partition whose consumer has no leader wastes whole attempts** (`node/cluster.go` `rebalance`: each `InputConsumer.Add` gets NodeTTL/5 × 2 and a request to a leaderless consumer gets no answer, so an attempt started just before the election still waits out its timeout). After a kill -9 this added up to 2 s to the sessions of such a partition (diagnostic runs). *Fix*: retry the consumer lookup with short tries inside one Add, or create the consumer handle without a lookup and let the pull requests find the leader.\n")
	w("10. **Clients could not send inputs while `TAH_IN` elected a leader** (up to 6.3 s after a kill -9 of its leader's server; `bus.PublishInput` returned \"no response from stream\" or waited for its deadline). *Fixed*: `bus.PublishInput` and tahctl retry in 2 s tries with the same `Nats-Msg-Id` (stored once), and the protocol tells clients to do the same.\n")
	w("11. **Loading a session during an election of its shard's leader (`TAH_EVT_<k>`; `TAH_EVT` when it was measured) can wait 30 s** (`bus.Bus.Replay` → `lastMsg`: a request to a leaderless stream gets no answer, and the load's first attempt waits for its whole deadline before `session.Manager.loadWithRetry` tries again). A survivor that got an input for a dead node's session in the first seconds served it after 36.8 s (diagnostic run). *Partly fixed*: a load now tries for 8 s at a time, for up to 30 s, and a load that still fails puts the input back (`session.ErrUnavailable`, a Nak) instead of failing it. *Still to do*: shorter tries (1–2 s) per request of a load.\n")
}

// clientProposals are the problems of package client the bench found.
func (r *Report) clientProposals(w func(string, ...any)) {
	w("12. **Every `client.Run` left a consumer on the server for five minutes, and asked the event stream before publishing** (a first version of package `client`: each `Turn` followed the session's log with an ordered consumer, created with nats.go's default `InactiveThreshold`, and read `TAH_EVT`'s info first). Row 6's 10,000 turns left 10,000 consumers of about 32 KB each; nats-server caps a stream at 1,000 consumers unless told otherwise, so a thousand turns within five minutes were refused with \"maximum consumers limit reached\" (the embedded server now lifts that cap, `bus/server.go`; a cluster on external NATS servers still has it); row 3 fell to 50%% and 14%% of the ideal; and in row 7 the inputs sent after a kill were stored only 4.2 s after it, once `TAH_EVT` and the meta group had leaders again. *Fixed*: a `Turn` asked only for its outcome subscribes to its reply subject and the input errors and publishes, nothing more; it follows the log (from the session's start, its turn known by its input id) only when the connection came back before the outcome did; a `Follower`'s consumer is removed by the server 10 s after it stops.")
	if m := r.Memory; m != nil {
		w(" In this run row 6's turns left %s consumers.", fnum(float64(m.ClientConsumers)))
	}
	w("\n")
}
