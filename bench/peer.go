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
	"strconv"
	"time"
)

// PeerResult is row 8: the same agent (turns of Steps tool steps, a model
// that answers at once, a tool that returns "ok") in TAH and in LangGraph.js
// with its SQLite checkpointer (bench/peer/langgraph), in the same run, at
// each durability of rows 1-3 against the SQLite setting that matches it:
// fsync on every write against synchronous=FULL, fsync every 2 minutes
// against synchronous=NORMAL.
type PeerResult struct {
	Steps int        `json:"steps"`
	Turns int        `json:"turns"`
	Rows  []*PeerRow `json:"rows"`
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
}

// peerScenario is row 8 under one durability setting.
type peerScenario struct {
	cfg  Config
	sync time.Duration
	st   *stack
}

func (s *peerScenario) Name() string {
	return fmt.Sprintf("row 8: the peer, turns of %d tool steps, TAH %s against LangGraph.js synchronous=%s", s.cfg.PeerSteps, durabilityName(s.sync), synchronousFor(s.sync))
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

// Run times TAH's turns, one warm-up first, then the peer's.
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
	row.PeerPerStep, row.NotRun = s.peer(ctx, row.Synchronous)
	if rep.Peer == nil {
		rep.Peer = &PeerResult{Steps: s.cfg.PeerSteps, Turns: s.cfg.PeerTurns}
	}
	rep.Peer.Rows = append(rep.Peer.Rows, row)
	return nil
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
