package bench

import (
	"fmt"
	"time"
)

// stepAt is row 2's result under fsync always (always) or under the first
// other setting, or nil.
func (r *Report) stepAt(always bool) *StepResult {
	for _, s := range r.Step {
		if (s.Sync == 0) == always {
			return s
		}
	}
	return nil
}

// targets says, target by target, whether it was met and by how much not.
func (r *Report) targets(w func(string, ...any)) {
	w("## Targets\n\n")
	if s := r.stepAt(true); s != nil {
		w("- **Row 2, a step at most %s× one fenced append of a record of its events (fsync always)**: %s per step against %s (one record of the step's %s events, %s): %s×, %s.\n",
			trimFloat(targetStepRatio), fdur(s.PerStep), fdur(s.StepRecordP50), trimFloat(s.EventsPerStep), fbytes(s.StepRecordBytesMean), trimFloat(round2(s.Ratio)),
			metOr(s.Ratio <= targetStepRatio, fmt.Sprintf("**missed** by %.0f%%", (s.Ratio/targetStepRatio-1)*100)))
	}
	if s := r.stepAt(false); s != nil {
		floor := ""
		if s.StepRecordCPU > 0 {
			// The floor the issue allows a target to be set from: what the
			// NATS client and server cost for the one write a step cannot
			// avoid, measured alone on the same machine.
			floor = fmt.Sprintf(" (the CPU floor, one fenced append of the step's record with the client and the embedded server in this process, costs %s: the step is %s× it, the target %s×)",
				fdur(s.StepRecordCPU), trimFloat(round1(s.CPURatio)), trimFloat(round1(float64(targetCPUPerStep)/float64(s.StepRecordCPU))))
		}
		w("- **Row 2, the node process's CPU at most %s a step (%s)**: %s%s, %s.\n", fdur(targetCPUPerStep), s.Durability, fdur(s.CPUPerStep), floor,
			metOr(s.CPUPerStep <= targetCPUPerStep, fmt.Sprintf("**missed**, %s× over", trimFloat(round1(float64(s.CPUPerStep)/float64(targetCPUPerStep))))))
	}
	for _, l := range r.Load {
		if l.Sync == 0 {
			w("- **Row 3, at least %.0f%% of what the disk allows (%s)**: %s steps/s against %s (%s fsynced writes/s from %s writers at once, ÷ %s writes a step): %.0f%%, %s.\n",
				targetOfDisk*100, l.Durability, fnum(l.StepsPerSec), fnum(l.DiskBound), fnum(l.DiskWritesPerSec), fnum(float64(l.Sessions)), trimFloat(round2(l.WritesPerStep)), l.OfDisk*100,
				metOr(l.OfDisk >= targetOfDisk, fmt.Sprintf("**missed** by %.0f points", (targetOfDisk-l.OfDisk)*100)))
		} else {
			w("- **Row 3, at least %.0f%% of the model-bound rate (%s)**: %s steps/s against %s: %.0f%%, %s.\n",
				targetOfModel*100, l.Durability, fnum(l.StepsPerSec), fnum(l.ModelBound), l.OfModel*100,
				metOr(l.OfModel >= targetOfModel, fmt.Sprintf("**missed** by %.0f points", (targetOfModel-l.OfModel)*100)))
		}
		w("- **Row 3, the read model at most a few seconds behind (%s)**: %s records behind when the last turn ended, applied %s later: %s.\n",
			l.Durability, fnum(float64(l.ReadModelBehind)), fdur(l.ReadModelCatchUp), metOr(l.ReadModelCatchUp <= targetReadModelLag, "**missed**"))
	}
	if rs := r.Resume; rs != nil && len(rs.Lengths) > 1 {
		first, last := rs.Lengths[0], rs.Lengths[len(rs.Lengths)-1]
		at := first
		for _, l := range rs.Lengths {
			if l.Events == rs.RatioEvents {
				at = l
			}
		}
		w("- **Row 4, at most %s× as long at %s events as at %s**: %s against %s, %s×: %s.\n", trimFloat(targetResume), fnum(float64(at.Events)), fnum(float64(first.Events)),
			fdur(at.FirstCall), fdur(first.FirstCall), trimFloat(round1(rs.Ratio)), metOr(rs.Ratio <= targetResume, fmt.Sprintf("**missed**, %s× over", trimFloat(round1(rs.Ratio/targetResume)))))
		if last.Events > at.Events {
			w("- **Row 4, a %s-event session resumes**: met, its first LLM call %s after `client.Run` (%s× the shortest history's).\n", fnum(float64(last.Events)), fdur(last.FirstCall), trimFloat(round1(float64(last.FirstCall)/float64(first.FirstCall))))
		}
	}
	w("- **Rows 5 and 6** have no target; they are reported.\n")
	r.failoverTarget(w)
	r.peerTarget(w)
	r.scaleTarget(w)
	if u := r.UI; u != nil {
		w("- **Row 10, the UI's first render at most %s**: the list %s, the %s-step session's page %s: %s.\n", fdur(targetUIRender), fdur(u.List), fnum(float64(u.Steps)), fdur(u.Session),
			metOr(u.List <= targetUIRender && u.Session <= targetUIRender, "missed"))
	}
	r.agentTarget(w)
	if r.Tenants != nil {
		w("- **Row 12** has no target (the issue asks for the ratio); it is reported.\n")
	}
	w("\n")
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// methods says how each row is measured.
func (r *Report) methods(w func(string, ...any)) {
	w("## How each row is measured\n\n")
	w("The log is a set of shard streams (`TAH_EVT_<k>`); each message of it is a *record*: one or more events of one session, written by one fenced append (`bus.SessionWriter.Append`, expected last sequence of the session's subject), so one durable write. A step of the loop stages its events and writes them with the next one that must be durable: a tool step writes two records (`llm.completed` with its `tool.started`s; the `tool.finished`s with the next `llm.started`), or one when its calls are all to idempotent tools of the node's own that end within 5 ms (`llm.completed`, the `tool.started`s and `tool.finished`s and the next `llm.started`: the noop tool of these rows is one), and `llm.started` holds the request by reference (what rebuilds it, and its SHA-256), so its size does not grow with the history.\n\n")
	w("1. **Floor.** After each measured turn of row 2 its records are read back (through the client) and, with the read model's projector paused, appended again on the same node by fenced appends as other sessions whose ids have the same length: (a) each full tool step's events as **one record**, the physical floor of a step, one durable write of its bytes; (b) each of those events as a record of its own; (c) the turn's records as TAH wrote them, and its checkpoint put again in `tah_checkpoints`. `store.Apply` is timed on a fresh store, one transaction per LLM step's records (the session's earlier events applied first, untimed). The SQLite one-row transaction uses the store's settings (WAL, synchronous NORMAL, BEGIN IMMEDIATE).\n")
	w("2. **A step.** One session; a short first turn spawns and claims it; then a turn of many tool steps is timed from `client.Run` to the client having its outcome, divided by its LLM steps. The mock (`mock.CallTool(\"noop\")`, then `mock.Say`) answers at once; the tool is a `tools.Func` that returns \"ok\". A probe provider around the mock records when each call begins and ends, so that the mock's time is left out of TAH's own. The ratio is that time over 1(a) of the same turn (median). TAH's own time is the step less 1(c) per step and the mock. The CPU per step is the process's user + system time (`getrusage`), from `client.Run` until the read model has applied the turn, over its LLM steps: everything in the process, the loop, the projector, the embedded server, and the client that drives the turn. Tracing is off in those turns, as it is by default. Then **tracing's cost**: as many rounds (after a warm-up round) of two such turns, one with tracing on and one with it off, each on the node started again with that tracing (a node takes it at its start; after each start the read model is let catch up and a garbage collection runs, so that what the restart leaves does not fall in the turn), so that the drifts fall on both alike. Tracing on is what `--tracing` sets up (`telemetry/otlp`: OpenTelemetry's SDK, its batching span processor and its OTLP/HTTP protobuf exporter; content capture off), exporting to a receiver in this process (`oteltest.Discard`, which reads each export and keeps nothing, so that its share of the CPU is the HTTP read); the spans are exported before the CPU count starts and again before it ends, so that a turn's export counts in the turn. The CPU per step with tracing on stands beside the one with it off of those rounds, with their ratio; the times per step, the allocations and the OTLP bytes sent a step are in the analysis.\n")
	w("3. **Throughput under load.** All sessions run a short warm-up turn (it spawns and claims them), then the measured turns, each session starting a fraction of an LLM call after the previous one. Steps/s is the steps over the wall time. The *model-bound* rate is every session waiting only for its model. The *disk-bound* rate is measured in the same run, before and after the turns: every session's turn written again from as many writers at once, the read model paused: its input stored as a client stores it (in a stream with `TAH_IN`'s settings that no node consumes), its records appended, its checkpoint put when the turn wrote one (short turns share one: `CheckpointEvery`), and the input removed as the node's ack removes it from the work queue; the fsynced writes per second that reaches, divided by TAH's durable writes per step (the input's two, its records and its checkpoint puts, over its steps; the read model's SQLite commits are not counted), is what the disk allows. *Added latency* is a step's time (one LLM call's start to the next's) less the model's. The read model's lag is read when the last outcome arrives: the records it has still to apply, and the time until it has.\n")
	w("4. **Resume.** The histories are built by real turns (fsync every 2 minutes, to build fast), with the other sessions' turns appended in between. Then, for each repeat, the node is stopped and started again on the same directory (a fresh server, Manager and actors; the read model is let to catch up first), a warm-up session takes the node's first turn, and each measured session gets an input; the time is from `client.Run` to the first LLM call, with fsync on every write.\n")
	w("5. **Token deltas.** This program starts itself again as a subscriber (`-delta-subscriber`, a plain NATS subscriber), which connects to the node's NATS port over TCP and subscribes to the session's delta subject. The provider's timestamp of each token is matched by delta sequence to the subscriber's receive time (one host, one wall clock). The floor is the same number of messages of the same size and headers published straight on the node's connection at the same pace.\n")
	w("6. **Memory.** `VmRSS` from `/proc/self/status` and the Go heap in use, each after a garbage collection that returns freed memory to the system: with the node up and no session, after every session has had one turn (all actors alive), and after every actor has passivated. The provider here keeps nothing. The node's embedded server runs in the process, so its share of each session is counted.\n")
	w("7. **Failover.** Three nodes of the cluster harness (`tahtest`), each with its embedded server, every stream and bucket R3, `bus.Default()`'s failover timings, fsync always. The victim is a tah-node process of its own sent SIGKILL (or with `-failover-kill shutdown` a node in this process whose embedded server is shut down at once). Sessions are created on the victim's partitions; half take a turn there and stay idle, the other half start a turn whose LLM call the victim's model holds. Once every such turn's log shows its LLM call open, the victim is killed; each idle session is then sent an input. The times are from the kill to each session's first LLM call on a survivor. Every session's log is then audited (`projection.Audit`), and the survivors' presence followed until it lists every partition once, for 2 × NodeTTL (at most %s after the kill). The cut-off case (`-failover-cutoff`, on by default) runs the same on a new cluster with the victim process sent SIGSTOP instead (its sockets left open: no FIN, its ports still accepting, the others see only silence) and its held LLM calls returning after %s; once the survivors carry everything on and those calls have returned, it is sent SIGCONT, must fence itself and write nothing more (every session's log audited again for a write of its epochs), and is then killed. Which signal made the survivors take the victim for dead is read from their logs: the NATS servers' (a disconnect advisory, its routes lost and its port refusing) or the silence (NodeTTL).\n", fdur(presenceWindow), fdur(cutHold))
	r.peerMethod(w)
	r.scaleMethod(w)
	w("10. **The UI's first render.** One node (fsync every 2 minutes, to build fast) with the sessions created through the API and one session given real turns (the model calls the noop tool 99 times a turn, then answers) until it has its steps; the read model is let to catch up. The step inspector's handler (package `inspector`, over the bench's client) serves on loopback; a plain HTTP client gets the list's first page and the long session's page %d times each, and each time is from the request to the page's last byte: the API's reads, the fold of the session's whole log (`tah.api.events`, `projection.Apply`) and the templates. A browser's own layout is not counted.\n", uiRenders)
	w("11. **A turn over the agent protocol.** One node (fsync always, the default) with its agent gateway started as tah-node starts it (`node.Options.Agents`, on a connection of its own with a credential of the `agents` role), and a caller of the protocol on another connection: plain nats.go, a credential of role `client` issued from the node's trust material, its own inbox prefix (`_INBOX_%s.`). Each prompt is a JSON envelope published with a reply subject the caller subscribed to just before; the times run from that subscription to the `ack` status chunk, to the first `response` chunk and to the terminator (the empty message). The controller's prompts (`agents.prompt.tah.<owner>.new`) each create a session; an instance's (`agents.prompt.tah.<owner>.<sid>`) continue one session. The same turns go through TAH's own client, the bench's (its own connection): `client.Create` then `client.Run` for a new session, `client.Run` for the continued one, both `WithDeltas` (the client's counterpart of a response stream), timed from the first call to the first delta and to the outcome. The four paths take turns, round after round, so that the machine's drifts fall on each alike. The model streams one text answer of %d tokens (no tool: a turn is one LLM step), the first %s after its call began and then one every %s; the floors are its own times in each path's turns as the probe saw them: from the call's start to its first token (for the first chunk), and to its end (for the terminator).\n",
		agentCaller, agentTokens, fdur(agentFirstToken), fdur(agentPace))
	r.tenantsMethod(w)
	w("Rows 1–3 run under both durability settings: `fsync always` is `bus.Config.SyncInterval` 0, the default (every write is on disk before its acknowledgement); `fsync every 2m` is the NATS server's own default.\n\n")
}

// stepAnalysis explains rows 1 and 2.
func (r *Report) stepAnalysis(w func(string, ...any)) {
	s := r.stepAt(true)
	if s == nil && len(r.Step) > 0 {
		s = r.Step[0]
	}
	if s == nil {
		return
	}
	w("### A step: %s durable writes, the request by reference\n\n", trimFloat(s.RecordsPerStep))
	w("A tool step in the middle of row 2's turn writes %s events in %s records (%s). `llm.started` holds the request by reference: its record alone is %s to %s over the %d steps of the turn, flat while the history grows. One record of the whole step's events is %s; a record of one event %s on average.\n\n",
		trimFloat(s.EventsPerStep), trimFloat(s.RecordsPerStep), joinOr(s.StepRecords, "none"), fbytes(s.LLMStartedBytesMin), fbytes(s.LLMStartedBytesMax), s.ToolSteps, fbytes(s.StepRecordBytesMean), fbytes(s.EventBytesMean))
	for _, x := range r.Step {
		w("- %s: a step took %s; one append of the step's record %s, its %s records as written %s (%s× the one append), a record of one event %s. TAH's own time per step (less its writes and the mock) is %s; from one LLM call to the next, %s against %s of writes in between. The process spent %s of CPU per step%s.%s The read model had applied the turn %s after its outcome. The end of a turn (agent.finished, the checkpoint of %s) cost %s, its start (`client.Run` to the first LLM call) %s.\n",
			x.Durability, fdur(x.PerStep), fdur(x.StepRecordP50), trimFloat(x.RecordsPerStep), fdur(x.StepAppendsP50), trimFloat(round2(float64(x.StepAppendsP50)/float64(max(x.StepRecordP50, 1)))),
			fdur(x.OneEventP50), fdur(x.Overhead), fdur(x.StepGapP50), fdur(x.StepGapFloorP50), fdur(x.CPUPerStep), allocsPerStep(x), traced(x),
			fdur((x.CaughtUpPerStep-x.PerStep)*time.Duration(x.LLMCalls)), fbytes(x.CheckpointBytes), fdur(x.TurnEnd), fdur(x.TurnStart))
	}
	w("\nWith fsync always a step cannot cost less than its two fsynced writes, and the floor here is one: the ratio's least is about %s× (two appends over one) before TAH's own time is counted. With fsync every 2 minutes the appends are cheap and the CPU is what a step costs: the process's CPU per step counts the node (the loop's fold and encode, the projector's SQLite transaction), the embedded server's work for every append and delivery, and the client's share.\n\n",
		trimFloat(round2(float64(s.StepAppendsP50)/float64(max(s.StepRecordP50, 1)))))
	w("Where the CPU went (diagnostic runs: `-rows 2 -durability 2m -cpuprofile-load FILE`, the profiles of the measured turns until the read model had them, merged with `go tool pprof`; in this first measurement ten turns, about 600 µs of CPU a step then; FILE.row2-<sync>.allocs is its heap profile, .allocs.0 its base): the session's loop 30%% (its two appends 14%%, the tool runner 9%%, the request 4%%), the projector's `store.Apply` 20%% (its SQLite statements and commits, the snapshots), the embedded server 22%% and the NATS client 13%% (the appends, their acknowledgements, the deliveries to the projector, the deltas); allocation, across all of them, 19%%. *Done since*: the request's hash is taken up step after step (`event.RequestHasher`), the history is neither copied nor counted again for a request (`projection`: a message in the history is never written again, so a request sends it as it is), `Stamp` and the check for running tools skip the steps that have ended, the tools' digest is kept while they do not change, `llm.CheckPairing` (the mock's and the providers' check of every request) allocates nothing, and the read model writes its rows up to 8 a statement (its tail 16, and none for a session whose snapshot the batch writes), keeps its positions in memory, encodes snapshots into a buffer it keeps and runs its statements on a context the SQLite driver does not watch with a goroutine each: from 640 µs to 513 µs of CPU, 574 to 452 allocations and 105 KB to 78 KB allocated a step in turns of 200 steps (medians of ten runs of each build side by side on the same machine), from 1.08 ms to 650 µs and 202 KB to 97 KB at 1,000 steps, where a step's cost grew with its turn. *Done since* (problem 3): the owner folds the payloads it has just encoded instead of decoding them (`projection.ApplyTyped`), the writer builds a record's body around its payloads instead of encoding them again (`event.EncodeRecord`), the bus checks an event's type without making a payload, and a request's hash is taken up from the last step's without comparing the history hashed (`event.RequestHasher.SumGrown`) or encoding its tools again: 475 to 449 allocations a step (medians of 16 runs of each build side by side, on a machine at a load of 31 to 45 for its 2 cores, where the CPU a step, 1.08 ms and 990 µs, is mostly noise), the owner's fold of a step's events about 6× and its record's encoding about 3× cheaper (`go test -bench StepEvents ./event`). *The floor of the target*, measured in every run since (row 1, `step_record_cpu_ns` in the JSON): the CPU of this process while the step's one record is appended again, fenced and acknowledged, through nats.go to the embedded server, the read model paused: 33–55 µs a step in runs on this kind of machine, this run's in row 1 (an earlier measurement of two records a step under load, before a step became one record, gave 110–150 µs). The target is 3–4.5× that floor, so physics does not forbid it; what stands between are TAH's own parts. *Done since*: a checkpoint after a turn keeps only what the next turn reads of it (`projection.State.Slim`: 230 KB to 34 KB in this row, 392 to 351 µs a step, medians of 6 runs), an answer or a tool result under the log's limit is no longer encoded once more only to measure it (a bound from its strings' bytes, `payloadSize` was 5%%), and the mock counts its usage estimate in bytes instead of the runes of the whole history on every call (7%% of a 1,000-step turn's CPU, in the same process). *Done since*: the read model's snapshots, a quarter of its work, held the whole history again beside its rows at a geometric cadence; each batch now writes, for each session it changed, a snapshot without the lists that have rows (about a kilobyte however long the session; a load reads the rows and folds nothing again): `store`'s projection of one long session takes 2.2× less CPU an event and 300 interleaved sessions 1.3–1.5× the records a second (`go test -bench Project ./store`, both builds side by side); in row 2 the change is within the run-to-run noise of this machine (±15%%). *Next*, from a profile of a 1,000-step turn (`-steps 1000 -cpuprofile-load`): the projector's SQLite statements (the steps' rows most), the embedded server a quarter, the loop a fifth; a node that keeps no read model (a worker, row 9) leaves the first out. *Done since* (measured 2026-12-07, twelve runs' profiles merged, since `-cpuprofile-load` covers one turn): a new goroutine starts with an 8 KB stack and copies it each time a call goes deeper, and the tool runner started three a call (its mailbox's, the batch's, the call's), each growing on its way into the tool's input check, and asked through a future of the actor system (a process registered and removed, a 24-hour timer, one more goroutine); the loop started one more for each LLM call. The runner and the session manager now keep their goroutines for a while (`internal/gopool`; the runner's mailbox runs on them too), a call alone in its batch runs on the batch's own, and a session waits for its batch on a channel: a noop call through the runner went from 19.8 µs to 11–13 µs and 61 to 49 allocations (`go test -bench Execute ./actors/toolrunner`), and this row's CPU a step from 274 to 241 µs, 366 to 355 allocations (medians of 8 runs of each build taking turns on the same machine, the new one lower in all 8 pairs). Go's adaptive starting stacks (`GODEBUG=adaptivestackstart=1`) made the runner slower instead. The loop no longer reads every tool call of the session before every step, only the current turn's (2%% of a step in a 2,000-step turn, growing with the session). What still grows with a turn is the mock's own work on the whole request (its pairing check, its usage estimate), as a real provider encodes the whole request every call. *Done since* (2026-12-07, fourteen turns' profiles merged): encoding/json's reflection was a fifth of a step's CPU: its Marshal of the step's four payloads in `event.New` 11%%, its Unmarshal of every record and payload in the read model 10%%, and the request hash's, the read model rows' and the owner's fold's own uses (each new message encoded for the hash, each step's request reference and response and each message's tool calls for their rows, a check by reflection that each payload comes back from its JSON as it is). A tool step's four payloads, `llm.Message`, `llm.Response`, `llm.ToolCall` and `event.RequestRef` now write themselves as Marshal does (`AppendJSON`), the payloads and a record's body read themselves as Unmarshal does (`decodeJSON`), and anything else goes through encoding/json as before; fuzz tests hold each to encoding/json's bytes and values on any input. `go test -bench StepEvents ./event` (Go 1.27, whose encoding/json is built on encoding/json/v2): a step's `Decode` 15 to 5 µs, `DecodeRecord` 20 to 5 µs, `Typed` 3.6 to 2.9 µs; this row's CPU a step 426 to 375 µs (medians of 20 runs of each build taking turns, the new one lower in 16 of 20 pairs, on a machine where one build read anywhere from 280 to 510 µs), 307 to 320 allocations a step (a decoded string is an allocation of its own, where encoding/json/v2 spares some); row 3 with fsync every 2 minutes did not move measurably (medians of 8 runs each, 4,000 and 4,060 steps/s). What the profile holds now: the read model's SQLite statements 11%% (the steps' rows most), the embedded server about a fifth, the loop's appends, the mock's own scan of the whole request 3%% (it counts the turns to name its calls), and no part of TAH above 3%% that does not write or read the log. *Changed since* (2026-12-07, later): the row's CPU and allocations a step are the mean of its turns, no longer their median, and it measures 9 turns, not 3. A garbage collection costs 8–18 ms of CPU here (`GODEBUG=gctrace=1`, a live heap of 25–50 MB) and lands on one turn in two or three (a turn of 200 steps allocates about 9 MB), so that the turns of one run took from 102 to 308 µs a step, and a median left most of the collector's work out: on the same turns the mean reads 5–7%% above the median. `-cpuprofile-load` now profiles every measured turn, each into a file of its own (FILE.row2-<sync>.<session>; the last one's is FILE.row2-<sync> as before), since one turn holds a few dozen samples at the runtime's 100 Hz. Where a step's CPU went, 149 turns merged (531 samples): the projector 25%% (the steps' rows 9%%, binding their values 6.4%% of the process, most of it copying each string into C memory and freeing it after the statement; the messages' rows 5%%, the tool calls' 2%%, decoding the records 4%%), the loop 15%%, the model call with the mock 7%%, the tool runner 4%%, the embedded server's stream loop 14%% (a `pwrite` per append 3%%), the NATS client 6%%, and across all of them the garbage collector 10%% and allocation 7.5%%. *Done since*: the text columns that are mostly empty are bound as NULL and made '' again by SQLite (`coalesce`), which spares the driver a copy, an unbinding and a free each, and the harness's probe no longer calls the mock through a second `llm.Run`: 201 to 179 µs a step (means of 10 runs of each build taking turns, each run the median of 5 turns, the new one lower in 7 of 10 pairs); modernc.org/sqlite v1.63.0 opens its connections without SQLite's per-connection mutex, which every bind and column read took and released (3.8%% of this row's CPU went to the C library's emulation of it): `go test -bench ApplyTurn ./store` 80 to 77 µs a step (8 runs of each taking turns, lower in 6). Tried and left: a step's row as one JSON document that SQLite unpacks (`json_each`, `->>`) cost 4× binding its 29 values; a row of 7 columns and a JSON document for the rest saved a fifth of the row's cost, not worth its migration; the read model's foreign keys off moved nothing beyond the noise; nats-server's asynchronous persistence (`persist_mode: async`) acknowledges an append before it reaches the operating system, which a kill -9 of the node could lose. *Next*: the allocations (about 45 KB a step, which the collector pays for: the owner's and the read model's step lists growing, and database/sql's conversion of every argument of the read model's statements into a new slice, 3.5 KB a step, which only binding through the driver itself, `sql.Conn.Raw`, would spare).\n\n")
}

// loadAnalysis explains row 3: what bounds it, and the read model.
func (r *Report) loadAnalysis(w func(string, ...any)) {
	if len(r.Load) == 0 {
		return
	}
	w("### Under load: what bounds the steps/s\n\n")
	for _, l := range r.Load {
		w("- %s: %s steps/s, %.0f%% of the model-bound %s and %.0f%% of the disk-bound %s; %.2f of %d cores busy during the turns, so %s. A step waited %s (p50; %s p99) beyond its model, a turn %s at its start (`client.Run` itself %s%s) and %s at its end. The read model was %s records behind when the last turn ended and caught up %s later.\n",
			l.Durability, fnum(l.StepsPerSec), l.OfModel*100, fnum(l.ModelBound), l.OfDisk*100, fnum(l.DiskBound), l.CPUCores, r.Machine.CPUs, loadBound(l, r.Machine.CPUs),
			fdur(l.AddedP50), fdur(l.AddedP99), fdur(l.TurnStartP50), fdur(l.ClientRunP50), takenText(l), fdur(l.TurnEndP50), fnum(float64(l.ReadModelBehind)), fdur(l.ReadModelCatchUp))
	}
	w("\nWhere the time goes with fsync always (measured 2026-12-04 on this kind of machine, 3 turns a session): the sessions wait in `bus.SessionWriter.Append` (block profile, `-cpuprofile-load -blockprofile-load`) with 1.4 of 2 cores busy, and neither the CPU nor the disk's fsync count is spent. The group commit's atomic batches are dear: on an idle server one costs about 4.4 ms whatever its size (1 record 4.4 ms, 50 records 6.2 ms, 128 records 7.4 ms, against 0.29 ms for one single append), because nats-server stages every batch of an R1 file stream in a file store of its own (under strace, per batch: about 4 fsyncs, 3 directories made, 19 files opened, 12 unlinks, 3 renames). Under row 3's load the batches carried 50 records on average and took 63 ms each, and single appends queued behind them took 23 ms; without the group commit the row made 950-1,200 steps/s instead of 1,800-2,000, and fewer shards (2) or larger batches (512) changed nothing measurable. `TAH_IN` with limits retention instead of a work queue (an ack then writes no tombstone) gained 5%%: not worth a migration of the stream. A step's model call overlaps its `llm.started` write (added latency p50 147-249 ms before, 104-107 ms after) without moving the steps/s, which the turns' starts bound: the 1,000 next inputs arrive together, and `TAH_IN` stores them one fsync at a time in one stream (`client.Run` 0.5-0.9 s p50). The disk's bound now counts the input's two writes (its store and its removal), as the issue allows. With fsync every 2 minutes the CPU a step costs sets a ceiling below the model-bound rate: 1,000 sessions at 5 steps of 50 ms need 16,669 steps/s, which two cores give only at about 120 µs of CPU a step (row 2 measures it). *Done since* (2026-12-07): each LLM call ran on a goroutine of its own, whose stack growth on the way into the provider was 5–6%% of the CPU under this row's load with fsync every 2 minutes, and each tool call paid the same in the tool runner (row 2); both run on goroutines kept for the purpose now (`internal/gopool`): 4,648 to 4,828 steps/s (medians of 8 runs of each build taking turns, higher in 7 of 8 pairs). *Next*: the CPU per step (row 2's next steps); a turn's input folded into its first record (a node that takes inputs by request and writes them with `turn.started`, so that they share the group commit), or batches that nats-server does not stage on disk.\n")
	w("\nA turn's start, measured 2026-12-06 (row 3, fsync always, diagnostic runs on this kind of machine): of the 0.8–1.7 s from `client.Run` to a turn's first LLM call, `client.Run` itself took 0.19–0.24 s, and the input then waited 0.6–1 s (p50; 1.7–2.2 s p99) before its node took it; the node staged `turn.started` 0.05–0.1 ms after that and asked the model 0.04–0.1 ms later. The wait was not the node's: the bench's client named no sender, the form of credentials issued before inputs named theirs, which `TAH_TIN` stores and `TAH_IN` sources, and the input reached `TAH_IN` through that source 0.97 s (p50) after the client had its acknowledgement; the consumer then delivered it within 40 ms. A client without a credential's name now publishes on `tah.sess.<sid>.in.by.$anon`, which `TAH_IN` stores at once, as it stores a named credential's input (the floor above and row 9 already wrote that way): row 3 went from 1,645–1,892 to 2,713–2,912 steps/s, 28–35%% to 41–49%% of the disk's bound, in runs of both builds on the same machine (fsync every 2 minutes: 4,646 to 5,140 steps/s, one run each). A turn's start is now `TAH_IN`'s own: in those runs the input waited 0.2–0.26 s (p50) from stored to taken, in the full run of this page `client.Run` itself took 0.89 s and the wait 79 ms; `TAH_IN` stores each input with an fsync of its own and removes it on its acknowledgement with another (a tombstone), one at a time under the stream's lock, beside the shards' fsyncs, so 1,000 inputs that arrive together queue (`BenchmarkInputs` in `bus`: 1,000 inputs stored and delivered in 73 ms on an idle server, 208 ms with their acknowledgements). *Next*: fewer fsyncs of `TAH_IN` per turn (a turn's input written with its first record, or inputs spread over more than one stream).\n")
	w("\nThe sessions are driven through package `client`, in this process, on the same cores as the node: each turn's `client.Run` subscribes to its reply subject and the session's input errors, publishes the input and waits for the outcome. `-cpuprofile-load FILE` profiles the measured turns only, `-pause-read-model` runs them without the read model.\n\n")
}

// loadBound says what bounded a row-3 run: the CPU when the process kept
// nearly every core busy, the disk when TAH reached its bound, else the
// waits between the writes.
func loadBound(l *LoadResult, cpus int) string {
	switch {
	case l.CPUCores >= 0.85*float64(cpus):
		return "the CPU bounded it"
	case l.OfDisk >= targetOfDisk:
		return "the disk bounded it"
	case l.OfModel >= targetOfModel:
		return "the model bounded it"
	}
	return "neither the CPU nor the disk was saturated: the time went to waits between the writes (the added latency)"
}

// allocsPerStep is what row 2's process allocated per step, as the end of
// a sentence about its CPU ("" from a report that did not measure it).
// traced says what a step cost with tracing on, against tracing off.
func traced(s *StepResult) string {
	if s.TracedTurns == 0 {
		return ""
	}
	return fmt.Sprintf(" In the turns alternating tracing on and off, a step took %s and %s of CPU with tracing on, %s and %s with it off (%s), and allocated %s objects against %s; the exporter sent %s of OTLP a step.",
		fdur(s.TracedPerStep), fdur(s.TracedCPUPerStep), fdur(s.UntracedPerStep), fdur(s.UntracedCPUPerStep), fratio(s.TracedCPURatio),
		fnum(s.TracedAllocsPerStep), fnum(s.UntracedAllocsPerStep), fbytes(int(s.TracedOTLPBytesPerStep+0.5)))
}

func allocsPerStep(s *StepResult) string {
	if s.AllocsPerStep <= 0 {
		return ""
	}
	return fmt.Sprintf(" and allocated %s objects (%s) per step", fnum(s.AllocsPerStep), fbytes(int(s.AllocBytesPerStep+0.5)))
}

// takenText is, within a turn's start, the input's wait from stored to
// taken by its node, where the run measured it.
func takenText(l *LoadResult) string {
	if l.TakenP50 == 0 {
		return ""
	}
	return fmt.Sprintf(", then %s p50 and %s p99 from its input stored to the node taking it", fdur(l.TakenP50), fdur(l.TakenP99))
}
