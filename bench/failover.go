package bench

import (
	"encoding/json"
	"time"
)

// presenceWindow bounds how long after the kill the survivors' presence is
// followed (until it has been settled for 2 × NodeTTL).
const presenceWindow = 25 * time.Second

// targetFailover is the cluster issue's bound: with the default timings, a
// dead node's sessions go on elsewhere within 10 seconds.
const targetFailover = 10 * time.Second

// FailoverResult is row 7: three nodes, one killed abruptly while its
// sessions' turns are in flight; how long until they go on on the others.
type FailoverResult struct {
	// NotMeasured is the text of a report written before the row existed
	// (its "failover" was a string).
	NotMeasured string `json:"not_measured,omitempty"`

	Durability string `json:"durability"`
	Nodes      int    `json:"nodes"`
	Partitions int    `json:"partitions"`
	// The failover timings in force (bus.Default()'s).
	NodeTTL        time.Duration `json:"node_ttl_ns"`
	InputPinnedTTL time.Duration `json:"input_pinned_ttl_ns"`
	InputAckWait   time.Duration `json:"input_ack_wait_ns"`

	// Kill is how the victim was killed: KillShutdown (an in-process member:
	// its embedded server shut down at once), KillProcess (a process
	// member: SIGKILL) or KillStop (the cut-off case: a process member sent
	// SIGSTOP, its sockets left open, until the survivors took everything
	// over; then SIGCONT).
	Kill             string `json:"kill"`
	Victim           string `json:"victim"`
	VictimPartitions []int  `json:"victim_partitions"`
	// What the victim's server led in the JetStream cluster when it was
	// killed: the meta group, streams and consumers (each an R3 Raft group).
	VictimMetaLeader bool `json:"victim_meta_leader"`
	VictimStreamsLed int  `json:"victim_streams_led"`
	// VictimStreams names the streams it led.
	VictimStreams []string `json:"victim_streams,omitempty"`
	Streams       int      `json:"streams"`
	VictimConsLed int      `json:"victim_consumers_led"`
	Consumers     int      `json:"consumers"`
	// HeartbeatAge is how long before the kill a survivor last heard the
	// victim's presence on core NATS (the survivors count NodeTTL from it).
	HeartbeatAge time.Duration `json:"heartbeat_age_ns"`
	// KillTook is how long the kill took: the in-process server's Shutdown,
	// or the SIGKILL and the wait for the process to be gone.
	KillTook time.Duration `json:"kill_took_ns"`

	// Running: sessions whose turn was in flight on the victim (its model
	// holding the LLM call); from the kill to the first LLM call of each on a
	// survivor.
	Running      int             `json:"running_sessions"`
	RunningTimes []time.Duration `json:"running_ns"`
	RunningP50   time.Duration   `json:"running_p50_ns"`
	RunningMax   time.Duration   `json:"running_max_ns"`
	// Idle: other sessions of the victim (one finished turn there, nothing
	// running) sent an input right after the kill; from the kill to its first
	// LLM call on a survivor.
	Idle      int             `json:"idle_sessions"`
	IdleTimes []time.Duration `json:"idle_ns"`
	IdleP50   time.Duration   `json:"idle_p50_ns"`
	IdleMax   time.Duration   `json:"idle_max_ns"`
	// PublishMax is from the kill to the slowest acknowledgement of those
	// inputs' publishes (client.Run tries again while the input stream has
	// no leader).
	PublishMax time.Duration `json:"publish_max_ns"`
	// Rebalanced is from the kill until the survivors' presence (published
	// on core NATS every NodeTTL/5, so up to that late) listed every
	// partition between them, each once, for good; 0 when that was not so at
	// the end of the window followed (25 s).
	Rebalanced time.Duration `json:"rebalanced_ns"`
	// DoubleFrom and DoubleUntil bound when both survivors' presence listed
	// the same partitions (one took the other for dead), DoubleMax of them
	// at most; all 0 when that was not seen.
	DoubleFrom  time.Duration `json:"double_from_ns,omitempty"`
	DoubleUntil time.Duration `json:"double_until_ns,omitempty"`
	DoubleMax   int           `json:"double_partitions,omitempty"`
	// Finished is from the kill until the last turn's agent.finished (its
	// writer's clock: the same machine).
	Finished time.Duration `json:"finished_ns"`
	// TakenBy counts the sessions each survivor took over.
	TakenBy map[string]int `json:"taken_by"`
	// SurvivorFences are the survivors' self-fencings after the kill (their
	// "out of touch with NATS" warning): a node that takes itself for cut
	// off stops all its sessions.
	SurvivorFences []FenceAt `json:"survivor_fences,omitempty"`
	// Signals are what the survivors' logs said of the victim after the
	// kill: taken for dead on what the NATS servers saw (a disconnect
	// advisory, its routes lost and its port refusing), a suspicion left to
	// the silence, and when each took partitions over. Signal sums up which
	// signal fired: one of the NATS servers' (its why) or, when no survivor
	// took the victim for dead before its silence, signalSilence.
	Signals []FoSignal `json:"signals,omitempty"`
	Signal  string     `json:"signal,omitempty"`
	// ReadTimeouts counts the survivors' reads of a session's checkpoint or
	// log that waited out their deadline after the kill (session loads; a
	// direct get that a silent server, still routed to, never answered).
	ReadTimeouts int `json:"read_timeouts,omitempty"`

	// The cut-off case (KillStop). Stopped is how long the victim was
	// stopped; VictimFenced from its SIGCONT to its "out of touch with
	// NATS" warning (it stops all its sessions), -1 when not seen within
	// cutFenceWithin; VictimWrites the events of the victim's epochs written
	// to the sessions' logs after its SIGCONT (0: fenced); VictimLog its
	// warnings and errors after the SIGCONT (the first few).
	Stopped      time.Duration `json:"stopped_ns,omitempty"`
	VictimFenced time.Duration `json:"victim_fenced_ns,omitempty"`
	VictimWrites int           `json:"victim_writes,omitempty"`
	// VictimRefused counts the victim's appends refused after its SIGCONT
	// (its log's "fenced" errors): what it tried to write and could not.
	VictimRefused int      `json:"victim_refused,omitempty"`
	VictimLog     []string `json:"victim_log,omitempty"`

	// Problems are the correctness checks that failed: an input that did not
	// start exactly one turn, a turn that did not finish, a stale write.
	Problems []string      `json:"problems,omitempty"`
	Took     time.Duration `json:"took_ns"`
}

// boundIdle is what the settings allow for an input sent to a dead node's
// idle session: the survivors take the node for dead NodeTTL after its last
// heartbeat, checked every NodeTTL/5 (the pins expire InputPinnedTTL after
// its last pull, at most that long).
func (f *FailoverResult) boundIdle() time.Duration {
	return max(f.NodeTTL+f.NodeTTL/5, f.InputPinnedTTL)
}

// boundRunning is what the settings allow for a turn in flight: its input,
// delivered and not acknowledged, is redelivered InputAckWait after the dead
// node's last keep-alive (or, if later, once the survivors pull).
func (f *FailoverResult) boundRunning() time.Duration {
	return max(f.InputAckWait, f.boundIdle())
}

// FoSignal is a survivor's log line about the victim's death, After the kill.
type FoSignal struct {
	Node  string        `json:"node"`
	What  string        `json:"what"`
	After time.Duration `json:"after_ns"`
}

// FenceAt is a node fencing itself, some time after the kill.
type FenceAt struct {
	Node  string        `json:"node"`
	After time.Duration `json:"after_ns"`
}

// UnmarshalJSON reads a report of either form: the object, or the string of
// reports written before row 7 was measured.
func (f *FailoverResult) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*f = FailoverResult{NotMeasured: s}
		return nil
	}
	type plain FailoverResult
	return json.Unmarshal(b, (*plain)(f))
}
