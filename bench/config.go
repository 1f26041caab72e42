package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// ErrInvalidConfig is a Config that Validate refuses.
var ErrInvalidConfig = errors.New("invalid bench config")

// The ways to kill row 7's victim (Config.FailoverKill).
const (
	KillShutdown = "shutdown" // an in-process member: its embedded server shut down at once
	KillProcess  = "process"  // a process member (this program as tah-node): SIGKILL
	// KillStop is row 7's cut-off case (Config.FailoverCutOff), not a
	// -failover-kill: a process member sent SIGSTOP, its sockets left open.
	KillStop = "stop"
)

// The rows there are, in the order they run.
var allRows = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}

// Config is a run's rows, sizes and settings: Default's are the issue's
// sizes, QuickSizes' a smoke run's.
type Config struct {
	// Rows are the rows to run ("1" to "11"); rows 1 and 2 run together.
	Rows []string
	// Quick marks a smoke run (QuickSizes): the report says so.
	Quick bool
	// Tmp is the parent directory of the clusters' and stores' directories
	// (empty: the system's).
	Tmp string
	// Durability are the bus.Config.SyncInterval settings rows 1-3 run
	// under (0: fsync every write).
	Durability []time.Duration

	Steps     int // row 2: tool steps in the measured turn
	StepTurns int // row 2: measured turns

	LoadSessions int           // row 3: concurrent sessions
	LoadDelay    time.Duration // row 3: how long the mock takes to answer
	LoadSteps    int           // row 3: LLM steps a turn
	LoadTurns    int           // row 3: measured turns per session

	ResumeLengths []int // row 4: events in the resumed sessions' histories
	ResumeOthers  int   // row 4: other sessions interleaved
	ResumeBudget  int   // row 4: the context budget (ContextChars)
	ResumeRepeats int

	PeerSteps int    // row 8: tool steps in a turn of the peer's agent
	PeerTurns int    // row 8: measured turns
	PeerDir   string // row 8: the peer's directory (bench/peer/langgraph, from the repository's root)
	// Row 8's concurrent measure: PeerSessions sessions (0: none) run
	// PeerSessionTurns turns each back to back, all at once, in TAH and in
	// Restate (RestateDir: bench/peer/restate; empty: Restate does not run).
	PeerSessions, PeerSessionTurns int
	RestateDir                     string

	// Row 9: ScaleSessions run turns back to back, each a tool step and a
	// final step, against a model that answers over HTTP after ScaleDelay,
	// for ScaleDuration (after a ramp), on clusters of tah-node processes of
	// ScaleQuota CPUs each (a cgroup), under bus.Config.SyncInterval
	// ScaleSync; ScaleCurve are the node counts of the curve at
	// ScaleCurveQuota (none: no curve).
	ScaleSessions   int
	ScaleDelay      time.Duration
	ScaleDuration   time.Duration
	ScaleQuota      float64
	ScaleSync       time.Duration
	ScaleCurve      []int
	ScaleCurveQuota float64
	// ScaleFloor are the server counts of row 9's floor at R3: the NATS
	// servers alone in the same quotas (none: no floor).
	ScaleFloor []int

	DeltaTokens int           // row 5
	DeltaPace   time.Duration // row 5: pause between two tokens

	MemSessions int    // row 6
	MemProfile  string // row 6: a heap profile after passivation

	// UISessions and UISteps are row 10's: the sessions of the list, and
	// the steps of the session whose page is rendered.
	UISessions, UISteps int

	// AgentPrompts is row 11's measured turns of each path: prompts to the
	// controller (new sessions) and to one session's instance over the
	// agent protocol, and the same turns through client.Run.
	AgentPrompts int

	// Row 12: TenantSessions sessions run TenantTurns measured turns each,
	// spread over Tenants tenants, against the same on one tenant and on
	// the default tenant.
	Tenants, TenantSessions, TenantTurns int

	// FailoverSessions: row 7's sessions of the killed node with a turn in
	// flight, and as many idle ones sent an input after the kill.
	FailoverSessions int
	// FailoverKill is KillProcess or KillShutdown.
	FailoverKill string
	// FailoverCutOff also runs row 7's cut-off case: the victim, a process
	// member, is sent SIGSTOP instead of SIGKILL (its sockets stay open, the
	// others see only silence), and SIGCONT once the survivors have taken
	// everything over.
	FailoverCutOff bool
	// FailoverLead, a diagnostic: streams whose leadership moves to the node
	// to kill before the kill.
	FailoverLead []string

	// PauseReadModel, a diagnostic: rows 2-3 without the read model's
	// projector during the measured turns.
	PauseReadModel bool
	// PhaseProfile, a diagnostic: a CPU profile of row 3's measured turns
	// only, and of each of row 2's measured turns until the read model has
	// it (the last one's FILE.row2-<sync interval>, the others'
	// FILE.row2-<sync interval>.<session>), and of row 8's sessions at once
	// (FILE.row8-<sync interval>).
	PhaseProfile string
	// PhaseBlocking, with PhaseProfile: the mutex and block profiles of the
	// same phases too (FILE.mutex and FILE.block), whose recording the CPU
	// profile then counts.
	PhaseBlocking bool
	// Log, a diagnostic: the harness's log of every row (with row 7's
	// nodes') goes to this file; without it, a row that fails prints the end
	// of its own.
	Log string

	// Executable is this program, which the rows run again as sub-processes:
	// the delta subscriber (DeltaSubscriberFlag) and row 7's victim
	// (NodeFlag). Empty: os.Executable.
	Executable string
}

// The flags of the sub-processes the rows start (this program again): the
// main defines them and hands them to DeltaSubscriber and to tah-node's
// nodecmd.Run.
const (
	// DeltaSubscriberFlag takes the spec "URL,session,count".
	DeltaSubscriberFlag = "delta-subscriber"
	// NodeFlag, a bool, runs tah-node with the arguments after "--".
	NodeFlag = "tah-node"
)

// Default is the sizes, every row, both durability settings.
func Default() Config {
	return Config{
		Rows:       slices.Clone(allRows),
		Durability: []time.Duration{0, 2 * time.Minute},
		Steps:      200, StepTurns: 9,
		LoadSessions: 1000, LoadDelay: 50 * time.Millisecond, LoadSteps: 5, LoadTurns: 1,
		ResumeLengths: []int{100, 1000, 10000, 100000}, ResumeOthers: 1000, ResumeBudget: 4000, ResumeRepeats: 5,
		DeltaTokens: 2000, DeltaPace: time.Millisecond,
		MemSessions:      10000,
		FailoverSessions: 12, FailoverKill: KillProcess, FailoverCutOff: true,
		PeerSteps: 20, PeerTurns: 5, PeerDir: filepath.Join("bench", "peer", "langgraph"),
		PeerSessions: 16, PeerSessionTurns: 3, RestateDir: filepath.Join("bench", "peer", "restate"),
		ScaleSessions: 300, ScaleDelay: 50 * time.Millisecond, ScaleDuration: 20 * time.Second, ScaleQuota: 0.5,
		ScaleSync: 2 * time.Minute, ScaleCurve: []int{1, 2, 3, 5}, ScaleCurveQuota: 0.25, ScaleFloor: []int{3, 5},
		UISessions: 10000, UISteps: 1000,
		AgentPrompts: 20,
		Tenants:      100, TenantSessions: 400, TenantTurns: 3,
	}
}

// QuickSizes shrinks every size for a smoke run of every row (-quick).
func (c Config) QuickSizes() Config {
	c.Quick = true
	c.Steps, c.StepTurns = 50, 2
	c.LoadSessions, c.LoadTurns = 100, 1
	c.ResumeLengths, c.ResumeOthers, c.ResumeRepeats = []int{100, 1000}, 100, 3
	c.DeltaTokens = 300
	c.MemSessions = 500
	c.FailoverSessions = 4
	c.PeerTurns, c.PeerSessionTurns = 2, 1
	c.ScaleSessions, c.ScaleDuration, c.ScaleCurve = 60, 5*time.Second, nil
	c.UISessions, c.UISteps = 500, 200
	c.AgentPrompts = 5
	c.Tenants, c.TenantSessions, c.TenantTurns = 10, 40, 1
	return c
}

// runs reports whether row is among c.Rows.
func (c Config) runs(row string) bool { return slices.Contains(c.Rows, row) }

// Validate reports, wrapping ErrInvalidConfig, the first thing wrong with c.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrInvalidConfig)...)
	}
	for _, r := range c.Rows {
		if !slices.Contains(allRows, r) {
			return bad("row %q is not one of %v", r, allRows)
		}
	}
	for _, d := range c.Durability {
		if d < 0 {
			return bad("durability %v is negative (0 fsyncs every write)", d)
		}
	}
	switch {
	case len(c.Durability) == 0:
		return bad("no durability setting (0, a duration, or both)")
	case c.Steps < 3 || c.StepTurns < 1:
		return bad("row 2 needs at least 3 tool steps and 1 measured turn, not %d and %d", c.Steps, c.StepTurns)
	case c.LoadSessions < 1 || c.LoadSteps < 1 || c.LoadTurns < 1 || c.LoadDelay <= 0:
		return bad("row 3 needs sessions, steps, turns and an LLM delay above 0")
	case len(c.ResumeLengths) == 0 || c.ResumeRepeats < 1 || c.ResumeOthers < 0:
		return bad("row 4 needs history lengths and at least one repeat")
	case c.DeltaTokens < 1:
		return bad("row 5 needs tokens to stream")
	case c.UISessions < 1 || c.UISteps < 1:
		return bad("row 10 needs sessions and steps, not %d and %d", c.UISessions, c.UISteps)
	case c.PeerSessions < 0 || (c.PeerSessions > 0 && c.PeerSessionTurns < 1):
		return bad("row 8 needs a turn or more for each of its %d sessions at once, not %d", c.PeerSessions, c.PeerSessionTurns)
	case c.AgentPrompts < 1:
		return bad("-agent-prompts: %d is not at least 1", c.AgentPrompts)
	case c.Tenants < 2 || c.TenantSessions < c.Tenants || c.TenantTurns < 1:
		return bad("row 12 needs 2 tenants or more, a session at least for each, and a turn, not %d, %d and %d", c.Tenants, c.TenantSessions, c.TenantTurns)
	case c.MemSessions < 1:
		return bad("row 6 needs sessions")
	case c.ScaleSessions < 1 || c.ScaleDelay <= 0 || c.ScaleDuration <= 0 || c.ScaleSync < 0:
		return bad("row 9 needs sessions, an LLM delay and a duration above 0, not %d, %v and %v", c.ScaleSessions, c.ScaleDelay, c.ScaleDuration)
	case c.ScaleQuota <= 0 || (len(c.ScaleCurve) > 0 && c.ScaleCurveQuota <= 0):
		return bad("row 9's quotas must be above 0 CPUs, not %v and %v", c.ScaleQuota, c.ScaleCurveQuota)
	case c.FailoverSessions < 1:
		return bad("-failover-sessions: %d is not at least 1", c.FailoverSessions)
	case c.FailoverKill != KillShutdown && c.FailoverKill != KillProcess:
		return bad("-failover-kill: %q is not %s or %s", c.FailoverKill, KillShutdown, KillProcess)
	}
	for _, n := range c.ScaleFloor {
		if n < 3 {
			return bad("-scale-floor: %d servers cannot hold 3 replicas", n)
		}
	}
	for _, n := range c.ScaleCurve {
		if n < 1 {
			return bad("-scale-curve: %d is not a number of nodes", n)
		}
	}
	for _, l := range c.ResumeLengths {
		if l < 10 {
			return bad("-resume-events: %d is not a length of at least 10 events", l)
		}
	}
	if !slices.IsSorted(c.ResumeLengths) {
		return bad("-resume-events: %v are not in increasing order", c.ResumeLengths)
	}
	return nil
}
