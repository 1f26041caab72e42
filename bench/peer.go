package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PeerResult is row 8: the same agent (turns of Steps tool steps, a model
// that answers at once, a tool that returns "ok") in TAH, in LangGraph.js
// with its SQLite checkpointer (bench/peer/langgraph) and in Restate
// (bench/peer/restate, a Virtual Object per session with a ctx.run per model
// and per tool call), in the same run, at each durability of rows 1-3
// against the peers' settings that match it: fsync on every write against
// SQLite's synchronous=FULL and Restate's default (its log server fsyncs
// every write batch), fsync every 2 minutes against synchronous=NORMAL and
// Restate's log-server.rocksdb-disable-wal-fsync.
type PeerResult struct {
	Steps int `json:"steps"`
	Turns int `json:"turns"`
	// Sessions sessions run SessionTurns turns each back to back, all at
	// once (after a warm-up turn each): TAH's and Restate's concurrent rate.
	Sessions     int        `json:"sessions,omitempty"`
	SessionTurns int        `json:"session_turns,omitempty"`
	Rows         []*PeerRow `json:"rows"`
}

// PeerRow is one durability setting of row 8. A time per step is a turn's
// time divided by its tool steps, the median of the measured turns.
type PeerRow struct {
	Durability  string        `json:"durability"`  // TAH's
	Synchronous string        `json:"synchronous"` // SQLite's, for the peer
	TAHPerStep  time.Duration `json:"tah_per_step_ns"`
	PeerPerStep time.Duration `json:"peer_per_step_ns,omitempty"`
	// NotRun says why the peer did not run (no Node.js, its packages not
	// installed: `make bench-deps`); TAH's side is measured anyway.
	NotRun string `json:"peer_not_run,omitempty"`
	// TAHConcurrent is TAH's side of the concurrent measure.
	TAHConcurrent *PeerConcurrent `json:"tah_concurrent,omitempty"`
	// Restate is the second peer's side, at the setting that matches.
	Restate *RestatePeer `json:"restate,omitempty"`
	// NATSFloor is the floor of TAHConcurrent: the same sessions' appends
	// alone (natsFloor).
	NATSFloor *PeerConcurrent `json:"nats_floor,omitempty"`
}

// PeerConcurrent is PeerResult.Sessions sessions running turns at once.
type PeerConcurrent struct {
	Steps       int           `json:"steps"` // tool steps measured, all sessions'
	Elapsed     time.Duration `json:"elapsed_ns"`
	StepsPerSec float64       `json:"steps_per_s"`
	// PerStep is the median of a turn's time over its tool steps.
	PerStep time.Duration `json:"per_step_ns"`
	// CPUPerStep is the CPU of the processes that ran the sessions (TAH:
	// this one, node, embedded server and client; Restate: restate-server
	// and the Node.js process of the SDK's endpoint and the driver) over
	// Steps.
	CPUPerStep time.Duration `json:"cpu_per_step_ns"`

	sid string // TAH's: one of the sessions, whose turns natsFloor appends again
}

// RestatePeer is Restate's side of a row 8 setting.
type RestatePeer struct {
	Setting    string          `json:"setting"` // Restate's durability setting
	PerStep    time.Duration   `json:"per_step_ns,omitempty"`
	Concurrent *PeerConcurrent `json:"concurrent,omitempty"`
	// NotRun says why it did not run (its packages not installed, no
	// network namespace of its own, ...).
	NotRun string `json:"not_run,omitempty"`
}

// peerScenario is row 8 under one durability setting.
type peerScenario struct {
	cfg  Config
	sync time.Duration
	st   *stack
}

func (s *peerScenario) Name() string {
	restate, _ := restateSetting(s.sync)
	return fmt.Sprintf("row 8: the peers, turns of %d tool steps, TAH %s against LangGraph.js synchronous=%s and Restate %s", s.cfg.PeerSteps, durabilityName(s.sync), synchronousFor(s.sync), restate)
}

func (s *peerScenario) Setup(_ context.Context, env Env) error {
	tool, final := scriptedMocks(0)
	var err error
	s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: s.sync, provider: newProbe(tool, final, false)})
	return err
}

func (s *peerScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

// Run times TAH's turns, one warm-up first, then TAH's sessions at once,
// then the peers'.
func (s *peerScenario) Run(ctx context.Context, rep *Report) error {
	sid := "peer_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := s.st.create(ctx, sid); err != nil {
		return err
	}
	var per []time.Duration
	for i := range s.cfg.PeerTurns + 1 {
		t, o, err := s.st.run(ctx, sid, input(sid, s.cfg.PeerSteps))
		if err != nil {
			return err
		}
		if i > 0 {
			per = append(per, o.at.Sub(t.sent)/time.Duration(s.cfg.PeerSteps))
		}
	}
	row := &PeerRow{Durability: durabilityName(s.sync), Synchronous: synchronousFor(s.sync), TAHPerStep: medianDur(per)}
	if s.cfg.PeerSessions > 0 {
		c, err := s.concurrent(ctx)
		if err != nil {
			return err
		}
		row.TAHConcurrent = c
		if row.NATSFloor, err = s.natsFloor(ctx, c.sid); err != nil {
			return err
		}
	}
	row.PeerPerStep, row.NotRun = s.peer(ctx, row.Synchronous)
	if s.cfg.RestateDir != "" {
		row.Restate = runRestate(ctx, s.cfg, s.sync)
	}
	if rep.Peer == nil {
		rep.Peer = &PeerResult{Steps: s.cfg.PeerSteps, Turns: s.cfg.PeerTurns}
		if s.cfg.PeerSessions > 0 {
			rep.Peer.Sessions, rep.Peer.SessionTurns = s.cfg.PeerSessions, s.cfg.PeerSessionTurns
		}
	}
	rep.Peer.Rows = append(rep.Peer.Rows, row)
	return nil
}

// concurrent runs PeerSessions sessions at once, a warm-up turn each, then
// PeerSessionTurns turns each back to back, and measures the second part.
func (s *peerScenario) concurrent(ctx context.Context) (*PeerConcurrent, error) {
	n := s.cfg.PeerSessions
	base := "peerc_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sids := make([]string, n)
	for i := range sids {
		sids[i] = fmt.Sprintf("%s_%02d", base, i)
	}
	if err := parallel(ctx, n, n, func(i int) error {
		if err := s.st.create(ctx, sids[i]); err != nil {
			return err
		}
		_, _, err := s.st.run(ctx, sids[i], input(sids[i], s.cfg.PeerSteps))
		return err
	}); err != nil {
		return nil, fmt.Errorf("row 8's concurrent sessions, warming up: %w", err)
	}
	per := make([][]time.Duration, n)
	// A diagnostic: where TAH's sessions spend their CPU (-cpuprofile-load)
	// and wait (-blockprofile-load: its .block and .mutex profiles).
	var prof string
	if s.cfg.PhaseProfile != "" {
		prof = fmt.Sprintf("%s.row8-%s", s.cfg.PhaseProfile, s.sync)
	}
	stopProfile := profilePhase(prof, s.cfg.PhaseBlocking)
	cpu0, begin := cpuTime(), time.Now()
	err := parallel(ctx, n, n, func(i int) error {
		for range s.cfg.PeerSessionTurns {
			t, o, err := s.st.run(ctx, sids[i], input(sids[i], s.cfg.PeerSteps))
			if err != nil {
				return err
			}
			per[i] = append(per[i], o.at.Sub(t.sent)/time.Duration(s.cfg.PeerSteps))
		}
		return nil
	})
	elapsed, cpu := time.Since(begin), cpuTime()-cpu0
	stopProfile()
	if err != nil {
		return nil, fmt.Errorf("row 8's concurrent sessions: %w", err)
	}
	steps := n * s.cfg.PeerSessionTurns * s.cfg.PeerSteps
	return &PeerConcurrent{Steps: steps, Elapsed: elapsed, StepsPerSec: float64(steps) / elapsed.Seconds(),
		PerStep: medianDur(slices.Concat(per...)), CPUPerStep: cpu / time.Duration(steps), sid: sids[0]}, nil
}

// natsFloor is the floor of the concurrent measure: the records of its
// session sid's measured turns (as the node wrote them, in their sizes),
// appended by PeerSessions writers at once to the node's server, each record
// by one fenced append as a session's owner makes it, each writer a session
// of its own with an id as long: what NATS alone allows for those sessions'
// writes at this durability, with no loop, no read model and no client.
func (s *peerScenario) natsFloor(ctx context.Context, sid string) (*PeerConcurrent, error) {
	evs, err := readLog(ctx, s.st.cl, sid, 0)
	if err != nil {
		return nil, err
	}
	recs, err := secondTurnRecords(evs) // the turns after the warm-up
	if err != nil {
		return nil, err
	}
	n := s.cfg.PeerSessions
	base := "peerf_" + strings.TrimPrefix(sid[:strings.LastIndexByte(sid, '_')], "peerc_")
	b := s.st.c.Bus()
	per := make([]time.Duration, n)
	cpu0, begin := cpuTime(), time.Now()
	err = parallel(ctx, n, n, func(i int) error {
		t := time.Now()
		if _, err := appendRecords(ctx, b, fmt.Sprintf("%s_%02d", base, i), recs); err != nil {
			return err
		}
		per[i] = time.Since(t) / time.Duration(s.cfg.PeerSessionTurns*s.cfg.PeerSteps)
		return nil
	})
	elapsed, cpu := time.Since(begin), cpuTime()-cpu0
	if err != nil {
		return nil, fmt.Errorf("row 8's floor: %w", err)
	}
	steps := n * s.cfg.PeerSessionTurns * s.cfg.PeerSteps
	return &PeerConcurrent{Steps: steps, Elapsed: elapsed, StepsPerSec: float64(steps) / elapsed.Seconds(),
		PerStep: medianDur(per), CPUPerStep: cpu / time.Duration(steps)}, nil
}

// peerOut is what bench/peer/langgraph/agent.mjs prints.
type peerOut struct {
	Results []struct {
		Synchronous string  `json:"synchronous"`
		PerStepMS   float64 `json:"per_step_ms"`
	} `json:"results"`
}

// peer runs the LangGraph.js agent with SQLite's synchronous setting sync
// and returns its time per step, or why it could not run.
func (s *peerScenario) peer(ctx context.Context, sync string) (time.Duration, string) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		return 0, "no Node.js (node) on the PATH"
	}
	if _, err := os.Stat(filepath.Join(s.cfg.PeerDir, "node_modules")); err != nil {
		return 0, "its npm packages are not installed: run `make bench-deps`"
	}
	dir, err := os.MkdirTemp(s.cfg.Tmp, "tah-peer-")
	if err != nil {
		return 0, err.Error()
	}
	defer os.RemoveAll(dir)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, nodeBin, "agent.mjs", strconv.Itoa(s.cfg.PeerSteps), strconv.Itoa(s.cfg.PeerTurns), sync, dir)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.cfg.PeerDir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Sprintf("agent.mjs failed: %v: %s", err, lastLine(stderr.String()))
	}
	var out peerOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != 1 {
		return 0, fmt.Sprintf("agent.mjs printed no result: %v: %s", errors.Join(err), lastLine(stdout.String()))
	}
	return time.Duration(out.Results[0].PerStepMS * float64(time.Millisecond)), ""
}

// synchronousFor is the SQLite setting that matches TAH's durability d:
// FULL syncs every commit, NORMAL in WAL mode only at checkpoints.
func synchronousFor(d time.Duration) string {
	if d == 0 {
		return "FULL"
	}
	return "NORMAL"
}

// lastLine is the last non-empty line of s, for error messages.
func lastLine(s string) string {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
