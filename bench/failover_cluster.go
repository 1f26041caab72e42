package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// Row 7's cluster: three members, the last one the victim.
const (
	foSize   = 3
	foVictim = 2
)

// The prefixes of row 7's sessions: those with a turn in flight on the
// victim when it is killed, and those idle there.
const (
	runPrefix  = "s_forun_"
	idlePrefix = "s_foidle_"
)

// foHold is how long the victim's model holds the calls of the turns in
// flight: until it dies. In the cut-off case it is cutHold: the calls
// return while the victim is stopped, so that once continued it has their
// answers to write at once, as a paused owner would (and must not).
const (
	foHold  = time.Hour
	cutHold = 20 * time.Second
)

// failoverScenario is row 7: three nodes of the harness (tahtest); the
// sessions of one, some with a turn in flight and some idle; that node
// killed abruptly (a process member sent SIGKILL, or with KillShutdown an
// in-process member whose embedded server is shut down at once, its routes
// and clients dropping as on kill -9); how long until the survivors carry
// its sessions on.
type failoverScenario struct {
	cfg Config
	env Env
	c   *tahtest.Cluster
	// cl is the row's client, connected to a survivor (n0), so that the
	// times measured are the cluster's, not a client's reconnection.
	cl     *client.Client
	rec    *foCalls
	fences *foFences
	res    *FailoverResult
	begin  time.Time
	script string // the victim process's mock script file

	// cut runs the cut-off case (KillStop): the victim is sent SIGSTOP, not
	// SIGKILL. victim is its process (the command's last run).
	cut    bool
	victim atomic.Pointer[exec.Cmd]
	// held is when every turn in flight had its LLM call open on the victim.
	held time.Time

	running, idle []string
	// inputs are each session's inputs, in order.
	inputs map[string][]string
	// turns are the turns started, to wait for their outcomes.
	turns []*turn
}

func (s *failoverScenario) Name() string {
	if s.cut {
		return fmt.Sprintf("row 7: failover, three nodes (R3), one cut off (SIGSTOP: no FIN) with %d turns in flight on it", s.cfg.FailoverSessions)
	}
	return fmt.Sprintf("row 7: failover, three nodes (R3), kill -9 of one with %d turns in flight on it", s.cfg.FailoverSessions)
}

// kill is how the victim is killed: the cut-off case always stops a process.
func (s *failoverScenario) kill() string {
	if s.cut {
		return KillStop
	}
	return s.cfg.FailoverKill
}

// hold is how long the victim's model holds the turns in flight.
func (s *failoverScenario) hold() time.Duration {
	if s.cut {
		return cutHold
	}
	return foHold
}

func (s *failoverScenario) victimID() string { return s.c.ID(foVictim) }

// failoverScript is the victim's model: it holds the calls of the turns in
// flight for hold (until it dies), and answers the others at once.
func failoverScript(hold time.Duration) *mock.Script {
	return mock.NewScript(
		mock.Say("done").OnPrompt(runPrefix).After(hold).Always(),
		mock.Say("done").Always())
}

// Setup starts the cluster (fsync always, bus.Default()'s timings), waits
// until the three share the partitions, moves the leaderships -failover-lead
// asks for, and connects the client.
func (s *failoverScenario) Setup(ctx context.Context, env Env) error {
	s.env, s.begin = env, time.Now()
	s.rec, s.fences = &foCalls{calls: map[string][]foCall{}}, &foFences{}
	def := bus.Default()
	s.res = &FailoverResult{Durability: durabilityName(0), Kill: s.kill(), Nodes: foSize, Partitions: def.Partitions,
		NodeTTL: def.NodeTTL, InputPinnedTTL: def.InputPinnedTTL, InputAckWait: def.InputAckWait,
		Running: s.cfg.FailoverSessions, Idle: s.cfg.FailoverSessions, TakenBy: map[string]int{}}
	opts, err := s.options()
	if err != nil {
		return err
	}
	s.c = tahtest.Start(env.TB, opts)
	s.res.Victim = s.victimID()
	recs, err := s.c.BalancedWithin(time.Minute, s.c.IDs()...)
	if err != nil {
		return err
	}
	env.Note("three nodes up and balanced in %s: %s", fdur(time.Since(s.begin).Round(time.Millisecond)), tahtest.DescribeNodes(recs))
	for _, r := range recs {
		if r.Node == s.victimID() {
			s.res.VictimPartitions = r.Partitions
		}
	}
	for _, st := range s.cfg.FailoverLead {
		s.c.MoveLeader(st, foVictim)
		env.Note("moved the leadership of %s to %s", st, s.victimID())
	}
	l := s.c.Layout()
	s.cl, err = client.Connect(ctx, client.Options{URL: l.Slots[0].URL(), CredsFile: l.Creds, Name: "tah-bench failover",
		RequestTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	return s.prepareSessions(ctx)
}

// options are the cluster's: the victim runs the script (as a process of
// this program as tah-node, or in this process), the survivors a model that
// answers at once and records its calls.
func (s *failoverScenario) options() (tahtest.Options, error) {
	victimModel, err := mock.New(failoverScript(s.hold()))
	if err != nil {
		return tahtest.Options{}, err
	}
	opts := tahtest.Options{Nodes: foSize, Dir: s.cfg.Tmp, EditNode: func(i int, o *node.Options) {
		id := o.Session.Node
		o.Logger = slog.New(fenceWatch{next: o.Logger.Handler(), node: id, at: s.fences})
		if i == foVictim {
			o.Provider = victimModel
			return
		}
		o.Provider = &survivorModel{node: id, rec: s.rec}
	}}
	if s.kill() == KillShutdown {
		return opts, nil
	}
	if s.script, err = writeScript(s.cfg.Tmp, failoverScript(s.hold())); err != nil {
		return opts, err
	}
	opts.Modes = map[int]tahtest.Mode{foVictim: tahtest.Process}
	opts.Command = func(_ int, args []string) *exec.Cmd {
		args = append(slices.Clone(args), "--llm-mock-script="+s.script, "--log-level=info")
		cmd := exec.Command(s.cfg.Executable, append([]string{"-" + NodeFlag, "--"}, args...)...)
		s.victim.Store(cmd)
		return cmd
	}
	return opts, nil
}

// writeScript writes sc to a new file in dir and returns its path.
func writeScript(dir string, sc *mock.Script) (string, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "tah-bench-script-*.json")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

func (s *failoverScenario) Teardown(context.Context) error {
	if s.cl != nil {
		s.cl.Close()
	}
	if s.c != nil && s.cut {
		s.c.Kill(foVictim) // stopped or not: SIGKILL ends it either way
	}
	if s.c != nil && s.cfg.Log != "" && s.kill() != KillShutdown {
		s.env.TB.Logf("===== the log of %s, the victim's process =====\n%s", s.victimID(), s.c.LogTail(foVictim, 1<<30))
	}
	if s.script != "" {
		return os.Remove(s.script)
	}
	return nil
}

// pick returns k session ids of prefix on the victim's partitions.
func (s *failoverScenario) pick(prefix string, k int) []string {
	var out []string
	for j := 0; len(out) < k; j++ {
		sid := fmt.Sprintf("%s%d", prefix, j)
		if slices.Contains(s.res.VictimPartitions, wire.Partition(sid, s.res.Partitions)) {
			out = append(out, sid)
		}
	}
	return out
}

// foCall is one LLM call as a survivor's model saw it.
type foCall struct {
	node string
	at   time.Time
}

// foCalls records every LLM call of the survivors by session.
type foCalls struct {
	mu    sync.Mutex
	calls map[string][]foCall
}

func (c *foCalls) add(sid, node string, at time.Time) {
	c.mu.Lock()
	c.calls[sid] = append(c.calls[sid], foCall{node: node, at: at})
	c.mu.Unlock()
}

// first returns the first call of sid at or after since.
func (c *foCalls) first(sid string, since time.Time) (foCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.calls[sid] {
		if !x.at.Before(since) {
			return x, true
		}
	}
	return foCall{}, false
}

// survivorModel is a survivor's model: it answers at once and records when
// it was called, by session.
type survivorModel struct {
	node string
	rec  *foCalls
}

var _ llm.Provider = (*survivorModel)(nil)

func (m *survivorModel) Name() string { return "bench-failover" }

func (m *survivorModel) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	sid, _, _ := turnOf(req.Messages)
	m.rec.add(sid, m.node, time.Now())
	return llm.Response{Model: "failover", Content: "done", FinishReason: llm.FinishStop}, ctx.Err()
}
