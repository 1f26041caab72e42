package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
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

	// Kill is how the victim was killed: "shutdown" (its embedded server
	// shut down at once in this process) or "process" (SIGKILL of a process
	// of its own).
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
	// inputs' publishes.
	PublishMax time.Duration `json:"publish_max_ns"`
	// PublishRetries counts the publishes of those inputs that failed and
	// were tried again (the input stream had no leader).
	PublishRetries int `json:"publish_retries"`
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

// foCall is one LLM call as a failover model saw it.
type foCall struct {
	node string
	at   time.Time
}

// foCalls records every LLM call of the three nodes by session.
type foCalls struct {
	mu    sync.Mutex
	calls map[string][]foCall
}

func (c *foCalls) add(sid, node string, at time.Time) {
	c.mu.Lock()
	c.calls[sid] = append(c.calls[sid], foCall{node: node, at: at})
	c.mu.Unlock()
}

// first returns the first call of sid on a node other than not, at or after
// since.
func (c *foCalls) first(sid, not string, since time.Time) (foCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.calls[sid] {
		if x.node != not && !x.at.Before(since) {
			return x, true
		}
	}
	return foCall{}, false
}

// foModel is a node's provider: it answers at once, except the calls of the
// sessions hold picks, which it holds until their context ends (the turns in
// flight on the node to kill).
type foModel struct {
	node  string
	rec   *foCalls
	hold  func(sid string) bool
	held  atomic.Int64 // calls being held now
	calls atomic.Int64
}

func (m *foModel) Name() string { return "bench-failover" }

func (m *foModel) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	sid, _, _ := turnOf(req.Messages)
	m.rec.add(sid, m.node, time.Now())
	m.calls.Add(1)
	if m.hold != nil && m.hold(sid) {
		m.held.Add(1)
		<-ctx.Done()
		m.held.Add(-1)
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{Model: "failover", Content: "done", FinishReason: llm.FinishStop}, ctx.Err()
}

// foCluster is three nodes, each with its embedded server, joined by routes.
// Each runs in this process, except the victim with -failover-kill process,
// which runs in a child process of its own (this program again, started with
// -failover-victim) so that it can be killed for real.
type foCluster struct {
	dir    string
	victim int
	nodes  []*node.Node // nil for a victim in a process of its own
	models []*foModel
	proc   *foProc
	logs   *os.File
	fences *foFences // of the nodes in this process
}

// foProc is the victim's process.
type foProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	held  atomic.Int64
	done  chan struct{} // closed when its output ends
}

// foVictimSpec is how the victim's process starts its node.
type foVictimSpec struct {
	Index      int           `json:"index"`
	DataDir    string        `json:"data_dir"`
	RoutePort  int           `json:"route_port"`
	Routes     []string      `json:"routes"`
	SyncEvery  time.Duration `json:"sync_ns"`
	HoldPrefix string        `json:"hold_prefix"`
	Log        string        `json:"log,omitempty"`
}

func freeRoutePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// foOptions are node i's options: an embedded server joined to the others by
// routes, R3, bus.Default()'s failover timings.
func foOptions(sp foVictimSpec, p llm.Provider, log *slog.Logger) node.Options {
	id := fmt.Sprintf("node%d", sp.Index)
	b := bus.Default()
	b.DataDir = sp.DataDir
	b.Port = -1
	b.ServerName = fmt.Sprintf("n%d", sp.Index)
	b.Cluster = bus.ClusterConfig{Name: "tahbench", Host: "127.0.0.1", Port: sp.RoutePort, Routes: sp.Routes}
	b.Replicas = 3
	b.SyncInterval = sp.SyncEvery
	b.ReadyTimeout = 60 * time.Second
	return node.Options{Bus: b, Provider: p, Logger: log,
		Session: session.Config{Node: id, IdleTimeout: time.Minute, Logger: log}}
}

func foLogger(w io.Writer, id string) *slog.Logger {
	if w == nil {
		return discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
}

// fenceWatch is a log handler that notes when a node fences itself (its
// "out of touch with NATS" warning) and hands every record on.
type fenceWatch struct {
	next slog.Handler
	node string
	at   *foFences
}

// foFences are the self-fencings of the nodes in this process.
type foFences struct {
	mu  sync.Mutex
	log []foFence
}

type foFence struct {
	node string
	at   time.Time
}

func (f *foFences) since(t0 time.Time) []FenceAt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FenceAt
	for _, x := range f.log {
		if !x.at.Before(t0) {
			out = append(out, FenceAt{Node: x.node, After: x.at.Sub(t0)})
		}
	}
	return out
}

func (h fenceWatch) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h fenceWatch) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.HasPrefix(r.Message, "out of touch with NATS") {
		h.at.mu.Lock()
		h.at.log = append(h.at.log, foFence{node: h.node, at: r.Time})
		h.at.mu.Unlock()
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h fenceWatch) WithAttrs(a []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(a)
	return h
}

func (h fenceWatch) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}

// startFoCluster starts size nodes at once (a JetStream cluster forms only
// when all its configured servers are up) with durability syncEvery. The
// victim's model holds the LLM calls of the sessions named holdPrefix...; the
// others answer at once.
func startFoCluster(ctx context.Context, cfg config, size, victim int, syncEvery time.Duration, rec *foCalls, holdPrefix string) (*foCluster, error) {
	dir, err := os.MkdirTemp(cfg.tmp, "tah-bench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &foCluster{dir: dir, victim: victim, nodes: make([]*node.Node, size), models: make([]*foModel, size), fences: &foFences{}}
	if cfg.failoverLog != "" {
		if c.logs, err = os.Create(cfg.failoverLog); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	specs := make([]foVictimSpec, size)
	var routes []string
	for i := range size {
		p, err := freeRoutePort()
		if err != nil {
			c.close(ctx)
			return nil, err
		}
		specs[i] = foVictimSpec{Index: i, DataDir: filepath.Join(dir, fmt.Sprintf("node%d", i)), RoutePort: p, SyncEvery: syncEvery}
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range specs {
		specs[i].Routes = routes
	}
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range size {
		id := fmt.Sprintf("node%d", i)
		if i == victim && cfg.failoverKill == killProcess {
			sp := specs[i]
			sp.HoldPrefix = holdPrefix
			if cfg.failoverLog != "" {
				sp.Log = cfg.failoverLog + "." + id
			}
			wg.Add(1)
			go func() { defer wg.Done(); c.proc, errs[i] = startFoProc(ctx, sp) }()
			continue
		}
		m := &foModel{node: id, rec: rec}
		if i == victim {
			m.hold = func(sid string) bool { return strings.HasPrefix(sid, holdPrefix) }
		}
		c.models[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w io.Writer
			if c.logs != nil {
				w = c.logs
			}
			sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			log := slog.New(fenceWatch{next: foLogger(w, id).Handler(), node: id, at: c.fences})
			n, err := node.Start(sctx, foOptions(specs[i], m, log))
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", id, err)
				return
			}
			c.nodes[i] = n
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.close(ctx)
		return nil, err
	}
	return c, nil
}

// startFoProc starts the victim's process and waits until its node runs.
func startFoProc(ctx context.Context, sp foVictimSpec) (*foProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	p := &foProc{cmd: exec.Command(self, "-failover-victim", string(spec)), done: make(chan struct{})}
	p.cmd.Stderr = os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			var n int64
			switch t := lines.Text(); {
			case t == "ready":
				close(ready)
			case strings.HasPrefix(t, "held "):
				if _, err := fmt.Sscan(strings.TrimPrefix(t, "held "), &n); err == nil {
					p.held.Store(n)
				}
			}
		}
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		err = errors.New("it exited")
	case <-time.After(90 * time.Second):
		err = errors.New("not ready within 90s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, fmt.Errorf("node%d's process: %w", sp.Index, err)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *foProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	<-p.done
}

// failoverVictim is the victim's process (-failover-victim): its node runs
// until it is killed, or its standard input closes (the parent ended without
// killing it), and it prints "ready", then "held N" whenever the number of
// LLM calls it holds changes.
func failoverVictim(ctx context.Context, spec string, stdout io.Writer) error {
	var sp foVictimSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		return fmt.Errorf("-failover-victim: %w", err)
	}
	var w io.Writer
	if sp.Log != "" {
		f, err := os.Create(sp.Log)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	id := fmt.Sprintf("node%d", sp.Index)
	m := &foModel{node: id, rec: &foCalls{calls: map[string][]foCall{}},
		hold: func(sid string) bool { return strings.HasPrefix(sid, sp.HoldPrefix) }}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	n, err := node.Start(sctx, foOptions(sp, m, foLogger(w, id)))
	cancel()
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		fmt.Fprintln(stdout, s)
		outMu.Unlock()
	}
	say("ready")
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	last := int64(-1)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if h := m.held.Load(); h != last {
				last = h
				say(fmt.Sprintf("held %d", h))
			}
			continue
		case <-gone:
		case <-ctx.Done():
		}
		break
	}
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return n.Close(cctx)
}

// held is the number of LLM calls the victim holds.
func (c *foCluster) held() int64 {
	if c.proc != nil {
		return c.proc.held.Load()
	}
	return c.models[c.victim].held.Load()
}

// kill kills the victim at once and returns when it did so (t0) and how
// long the kill took.
func (c *foCluster) kill() (t0 time.Time, took time.Duration) {
	t0 = time.Now()
	if c.proc != nil {
		c.proc.kill()
	} else {
		// The server goes at once, its routes and clients with it; the node
		// is not told (its Close comes after the measurement).
		c.nodes[c.victim].Bus.Server().Shutdown()
	}
	return t0, time.Since(t0)
}

// close stops every node at once (none waits for a cluster that lost its
// quorum) and removes the directory. The victim's Close only frees what is
// left of it; its errors mean nothing.
func (c *foCluster) close(ctx context.Context) {
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := 30 * time.Second
			if i == c.victim {
				d = 10 * time.Second
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
			defer cancel()
			_ = n.Close(cctx)
		}()
	}
	if c.proc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.proc.stdin.Close() // a victim not killed (an error before) stops
			select {
			case <-c.proc.done:
				_ = c.proc.cmd.Wait()
			case <-time.After(30 * time.Second):
				c.proc.kill()
			}
		}()
	}
	wg.Wait()
	if c.logs != nil {
		c.logs.Close()
	}
	os.RemoveAll(c.dir)
}

// balanced waits until tah_nodes lists the size nodes, each pulling its
// share of the partitions (give or take one), disjoint and covering all, and
// returns the records.
func balanced(ctx context.Context, b *bus.Bus, size int, within time.Duration) ([]wire.NodeRecord, error) {
	parts := b.Config().Partitions
	deadline := time.Now().Add(within)
	var last []wire.NodeRecord
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		recs, err := b.ListNodes(lctx)
		cancel()
		if err == nil {
			last = recs
			even := true
			for _, r := range recs {
				even = even && len(r.Partitions) >= parts/size && len(r.Partitions) <= parts/size+1
			}
			if len(recs) == size && even && covers(recs, parts, "") {
				return recs, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("tah_nodes not balanced over %d nodes within %v: %s", size, within, describeRecords(last))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// covers reports whether the records other than skip's pull every partition
// exactly once.
func covers(recs []wire.NodeRecord, parts int, skip string) bool {
	seen := map[int]int{}
	for _, r := range recs {
		if r.Node == skip {
			continue
		}
		for _, p := range r.Partitions {
			seen[p]++
		}
	}
	if len(seen) != parts {
		return false
	}
	for _, k := range seen {
		if k != 1 {
			return false
		}
	}
	return true
}

func describeRecords(recs []wire.NodeRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, fmt.Sprintf("%s %v", r.Node, r.Partitions))
	}
	return strings.Join(s, "; ")
}

// leaders fills in what the server named name leads in the JetStream
// cluster: the meta group (as srv sees it), and the streams and consumers as
// the JetStream API of b lists them.
func leaders(ctx context.Context, b *bus.Bus, srv *server.Server, name string, res *FailoverResult) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if jsz, err := srv.Jsz(nil); err == nil {
		res.VictimMetaLeader = jsz.Meta != nil && jsz.Meta.Leader == name
	}
	js := b.JetStream()
	streams := js.ListStreams(ctx)
	for si := range streams.Info() {
		res.Streams++
		if si.Cluster != nil && si.Cluster.Leader == name {
			res.VictimStreamsLed++
			res.VictimStreams = append(res.VictimStreams, si.Config.Name)
		}
		st, err := js.Stream(ctx, si.Config.Name)
		if err != nil {
			continue
		}
		consumers := st.ListConsumers(ctx)
		for ci := range consumers.Info() {
			res.Consumers++
			if ci.Cluster != nil && ci.Cluster.Leader == name {
				res.VictimConsLed++
			}
		}
	}
}

// foReplies is the prefix of the reply subjects of row 7's inputs.
const foReplies = "bench.fo.reply"

// lead moves the leadership of the streams to the server named name (a
// diagnostic: -failover-lead), and waits until it has it.
func lead(ctx context.Context, b *bus.Bus, streams []string, name string) error {
	for _, st := range streams {
		body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": name}})
		err := until(ctx, 20*time.Second, func() bool {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			s, err := b.JetStream().Stream(sctx, st)
			if err != nil {
				return false
			}
			if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader == name {
				return true
			}
			_, _ = b.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+st, body, 2*time.Second)
			time.Sleep(500 * time.Millisecond)
			return false
		})
		if err != nil {
			return fmt.Errorf("leadership of %s to %s: %w", st, name, err)
		}
	}
	return nil
}

// The ways to kill the victim (-failover-kill).
const (
	killShutdown = "shutdown" // in this process: its server's Shutdown
	killProcess  = "process"  // a process of its own, SIGKILL
)

// benchFailover measures row 7: three nodes; the sessions of one, some with a
// turn in flight and some idle; that node killed abruptly (its server shut
// down at once in this process, its routes and clients dropping as on kill
// -9, the node left without its graceful Close; or, with -failover-kill
// process, a real SIGKILL of its process); how long until the survivors carry
// its sessions on.
func benchFailover(ctx context.Context, cfg config, log io.Writer) (*FailoverResult, error) {
	begin := time.Now()
	const size, victim = 3, 2
	victimID := fmt.Sprintf("node%d", victim)
	def := bus.Default()
	res := &FailoverResult{Durability: durabilityName(0), Kill: cfg.failoverKill, Nodes: size, Partitions: def.Partitions,
		NodeTTL: def.NodeTTL, InputPinnedTTL: def.InputPinnedTTL, InputAckWait: def.InputAckWait,
		Victim: victimID, Running: cfg.failoverSessions, Idle: cfg.failoverSessions, TakenBy: map[string]int{}}
	note := func(format string, args ...any) {
		fmt.Fprintf(log, "      row 7: "+format+"\n", args...)
	}
	const runPrefix, idlePrefix = "s_forun_", "s_foidle_"
	rec := &foCalls{calls: map[string][]foCall{}}
	c, err := startFoCluster(ctx, cfg, size, victim, 0, rec, runPrefix)
	if err != nil {
		return nil, err
	}
	defer c.close(ctx)
	b := c.nodes[0].Bus // a survivor's: the client of the row
	recs, err := balanced(ctx, b, size, 60*time.Second)
	if err != nil {
		return nil, err
	}
	note("three nodes up and balanced in %s: %s", fdur(time.Since(begin).Round(time.Millisecond)), describeRecords(recs))
	for _, r := range recs {
		if r.Node == victimID {
			res.VictimPartitions = r.Partitions
		}
	}
	if len(res.VictimPartitions) == 0 {
		return nil, fmt.Errorf("%s pulls no partition: %s", victimID, describeRecords(recs))
	}

	if len(cfg.failoverLead) > 0 {
		if err := lead(ctx, b, cfg.failoverLead, fmt.Sprintf("n%d", victim)); err != nil {
			return nil, err
		}
		note("moved the leadership of %v to %s", cfg.failoverLead, victimID)
	}

	// The sessions: on the victim's partitions.
	pick := func(prefix string, k int) []string {
		var out []string
		for j := 0; len(out) < k; j++ {
			sid := fmt.Sprintf("%s%d", prefix, j)
			if slices.Contains(res.VictimPartitions, wire.Partition(sid, res.Partitions)) {
				out = append(out, sid)
			}
		}
		return out
	}
	running, idle := pick(runPrefix, cfg.failoverSessions), pick(idlePrefix, cfg.failoverSessions)
	all := append(slices.Clone(running), idle...)
	if err := parallel(ctx, len(all), 8, func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := session.Create(cctx, b, all[i], session.Config{MaxSteps: session.DefaultMaxSteps}, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	send := func(sid, id string, within time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		_, err := b.PublishInput(pctx, sid, wire.Input{ID: id, Command: wire.CommandRun, Text: input(sid, 0), ReplyTo: foReplies + "." + sid})
		return err
	}
	inputs := map[string][]string{} // session -> its inputs, in order
	// The idle sessions take one turn on the victim first: they are its
	// sessions, claimed by it, with nothing running.
	for _, sid := range idle {
		inputs[sid] = []string{"warm_" + sid}
	}
	if err := parallel(ctx, len(idle), 8, func(i int) error { return send(idle[i], "warm_"+idle[i], 20*time.Second) }); err != nil {
		return nil, fmt.Errorf("warm-up input: %w", err)
	}
	if err := waitFinished(ctx, b, inputs, 30*time.Second); err != nil {
		return nil, fmt.Errorf("warm-up turns on %s: %w", victimID, err)
	}
	for _, sid := range idle {
		if x, ok := rec.first(sid, victimID, begin); ok {
			return nil, fmt.Errorf("%s's warm-up turn ran on %s, not on %s", sid, x.node, victimID)
		}
	}
	// The turns start spread over one keep-alive period of their inputs
	// (InputAckWait/3), so that the kill finds their ack timers at every
	// phase, as it would find real turns.
	keepAlive := def.InputAckWait / 3
	for i, sid := range running {
		inputs[sid] = []string{"run_" + sid}
		if i > 0 {
			time.Sleep(keepAlive / time.Duration(len(running)))
		}
		if err := send(sid, "run_"+sid, 20*time.Second); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	if err := until(ctx, 30*time.Second, func() bool { return c.held() >= int64(len(running)) }); err != nil {
		return nil, fmt.Errorf("%d of %d turns in flight on %s: %w", c.held(), len(running), victimID, err)
	}

	// What the victim leads; the nodes' presence, as a survivor hears it.
	leaders(ctx, b, b.Server(), fmt.Sprintf("n%d", victim), res)
	pr := &presenceTracker{parts: res.Partitions, killed: victimID, last: map[string]wire.NodeRecord{}, heard: map[string]time.Time{}}
	sub, err := b.Conn().Subscribe(wire.NodeSubjects, pr.heardMsg)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	time.Sleep(def.NodeTTL / 5 * 3 / 2) // a presence of every node heard

	// What the nodes say of the inputs sent after the kill: their outcomes
	// (on the reply subject) and any input refused (on tah.sess.*.err).
	var refusedMu sync.Mutex
	var refused []string
	refuse := func(format string, args ...any) {
		refusedMu.Lock()
		refused = append(refused, fmt.Sprintf(format, args...))
		refusedMu.Unlock()
	}
	errSub, err := b.Conn().Subscribe(wire.ErrorSubjects, func(m *nats.Msg) {
		refuse("input error on %s: %s", m.Subject, m.Data)
	})
	if err != nil {
		return nil, err
	}
	defer errSub.Unsubscribe()
	replySub, err := b.Conn().Subscribe(foReplies+".>", func(m *nats.Msg) {
		var o wire.Outcome
		if json.Unmarshal(m.Data, &o) != nil || o.Failure != "" {
			refuse("outcome of the input to %s: %s", strings.TrimPrefix(m.Subject, foReplies+"."), m.Data)
		}
	})
	if err != nil {
		return nil, err
	}
	defer replySub.Unsubscribe()

	t0, took := c.kill()
	res.KillTook = took
	res.HeartbeatAge = pr.killedAt(t0)
	note("killed %s (%s; %d turns in flight, %d idle sessions) after %s; its server led the meta group: %v, %d of %d streams %v, %d of %d consumers",
		victimID, cfg.failoverKill, len(running), len(idle), fdur(time.Since(begin).Round(time.Millisecond)), res.VictimMetaLeader,
		res.VictimStreamsLed, res.Streams, res.VictimStreams, res.VictimConsLed, res.Consumers)
	// Each input is published as a client would: retried (same input id, so
	// stored once) while the stream has no leader, each try given 2 s (a
	// publish to a leaderless stream may get no answer at all).
	var publishMax atomic.Int64
	var retries atomic.Int64
	pubErrs := make(chan error, len(idle))
	for _, sid := range idle {
		go func() {
			var err error
			for {
				if err = send(sid, "in_"+sid, 2*time.Second); err == nil || time.Since(t0) > 30*time.Second || ctx.Err() != nil {
					break
				}
				retries.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			for d := int64(time.Since(t0)); ; {
				cur := publishMax.Load()
				if d <= cur || publishMax.CompareAndSwap(cur, d) {
					break
				}
			}
			if err != nil {
				err = fmt.Errorf("input to %s not published within 30 s of the kill: %w", sid, err)
			}
			pubErrs <- err
		}()
	}
	for _, sid := range idle {
		inputs[sid] = append(inputs[sid], "in_"+sid)
	}
	// (a) and (b): the first LLM call of each session on a survivor.
	const within = 45 * time.Second
	moved := func(sids []string) (times []time.Duration, missing []string) {
		for _, sid := range sids {
			x, ok := rec.first(sid, victimID, t0)
			if !ok {
				missing = append(missing, sid)
				continue
			}
			times = append(times, x.at.Sub(t0))
			res.TakenBy[x.node]++
		}
		return times, missing
	}
	_ = until(ctx, within, func() bool {
		for _, sid := range all {
			if _, ok := rec.first(sid, victimID, t0); !ok {
				return false
			}
		}
		return true
	})
	var missing []string
	var rt, it []time.Duration
	rt, missing = moved(running)
	if len(missing) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d turns in flight did not go on within %v: %v", len(missing), within, missing))
	}
	it, missing = moved(idle)
	if len(missing) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d inputs sent after the kill were not served within %v: %v", len(missing), within, missing))
	}
	for range idle {
		if err := <-pubErrs; err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	res.PublishMax, res.PublishRetries = time.Duration(publishMax.Load()), int(retries.Load())
	slices.Sort(rt)
	slices.Sort(it)
	res.RunningTimes, res.IdleTimes = rt, it
	res.RunningP50, res.IdleP50 = sample(rt).p50(), sample(it).p50()
	res.RunningMax, res.IdleMax = sample(rt).pct(100), sample(it).pct(100)
	if len(rt) < len(running) {
		res.RunningMax = within // at least
	}
	if len(it) < len(idle) {
		res.IdleMax = within // at least
	}

	// Every turn finishes, each input started exactly one turn, and no node
	// wrote with an epoch older than one already in the log.
	if err := waitFinished(ctx, b, inputs, 30*time.Second); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	refusedMu.Lock()
	res.Problems = append(res.Problems, refused...)
	refusedMu.Unlock()
	problems, last := checkTurns(ctx, b, inputs, victimID)
	res.Problems = append(res.Problems, problems...)
	res.Finished = last.Sub(t0)
	// The survivors' presence, until it has shared every partition between
	// them for 2 × NodeTTL (a later disagreement would show there).
	_ = until(ctx, max(presenceWindow-time.Since(t0), 0), func() bool { return pr.settled(2 * def.NodeTTL) })
	p := pr.result()
	for _, f := range c.fences.since(t0) {
		if f.Node != victimID {
			res.SurvivorFences = append(res.SurvivorFences, f)
		}
	}
	res.Rebalanced, res.DoubleFrom, res.DoubleUntil, res.DoubleMax = p.rebalanced, p.doubleFrom, p.doubleUntil, p.doubleMax
	note("running turns moved: p50 %s, max %s; inputs after the kill: p50 %s, max %s (published within %s, %d retries; victim's heartbeat %s old at the kill); taken by %v",
		fdur(res.RunningP50), fdur(res.RunningMax), fdur(res.IdleP50), fdur(res.IdleMax), fdur(res.PublishMax), res.PublishRetries, fdur(res.HeartbeatAge), res.TakenBy)
	for _, f := range res.SurvivorFences {
		note("%s, a survivor, fenced itself (stopped all its sessions) %s after the kill", f.Node, fdur(f.After))
	}
	if res.DoubleMax > 0 {
		note("both survivors' presence listed up to %d partitions each, from %s to %s after the kill", res.DoubleMax, fdur(res.DoubleFrom), fdur(res.DoubleUntil))
	}
	note("the survivors' presence shared every partition between them for good after %s (0: not within %s); the last turn finished after %s",
		fdur(res.Rebalanced), fdur(presenceWindow), fdur(res.Finished))
	for _, p := range res.Problems {
		note("PROBLEM: %s", p)
	}
	res.Took = time.Since(begin)
	return res, nil
}

// until polls cond every 20 ms for at most within.
func until(ctx context.Context, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// waitFinished waits until every session's log has an agent.finished for each
// of its inputs.
func waitFinished(ctx context.Context, b *bus.Bus, inputs map[string][]string, within time.Duration) error {
	pending := ""
	err := until(ctx, within, func() bool {
		for sid, ids := range inputs {
			if n := countType(replayLog(ctx, b, sid), event.AgentFinished); n < len(ids) {
				pending = fmt.Sprintf("%s: %d of %d turns finished", sid, n, len(ids))
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("turns not finished (%s): %w", pending, err)
	}
	return nil
}

// checkTurns reads every session's log: each input started exactly one turn,
// each turn finished once, no event has an epoch older than one before it,
// and the last claim is not the killed node's.
func checkTurns(ctx context.Context, b *bus.Bus, inputs map[string][]string, killed string) (out []string, lastFinished time.Time) {
	for _, sid := range slices.Sorted(func(yield func(string) bool) {
		for sid := range inputs {
			if !yield(sid) {
				return
			}
		}
	}) {
		ids := inputs[sid]
		evs := replayLog(ctx, b, sid)
		started := map[string]int{}
		var epoch uint64
		owner := ""
		for _, ev := range evs {
			if ev.Epoch < epoch {
				out = append(out, fmt.Sprintf("%s: event %d (%s) of epoch %d after epoch %d: a stale owner wrote", sid, ev.Seq, ev.Type, ev.Epoch, epoch))
			}
			epoch = max(epoch, ev.Epoch)
			switch ev.Type {
			case event.TurnStarted:
				d, _ := event.DecodeAs[event.TurnStartedData](ev)
				started[d.InputID]++
			case event.SessionClaimed:
				d, _ := event.DecodeAs[event.SessionClaimedData](ev)
				owner = d.Node
			case event.AgentFinished:
				if ev.Time.After(lastFinished) {
					lastFinished = ev.Time
				}
			}
		}
		for _, id := range ids {
			if started[id] != 1 {
				out = append(out, fmt.Sprintf("%s: input %s started %d turns, want 1", sid, id, started[id]))
			}
		}
		if n := countType(evs, event.AgentFinished); n != len(ids) {
			out = append(out, fmt.Sprintf("%s: %d turns finished, want %d", sid, n, len(ids)))
		}
		if owner == killed {
			out = append(out, fmt.Sprintf("%s: still owned by %s, the killed node", sid, killed))
		}
	}
	return out, lastFinished
}

// foPresence is what the survivors' presence showed after the kill.
type foPresence struct {
	rebalanced              time.Duration // every partition pulled by exactly one survivor, for good
	doubleFrom, doubleUntil time.Duration // some partition listed by both
	doubleMax               int           // the most partitions listed by both at once
}

// presenceTracker follows the nodes' presence on core NATS (what the nodes
// themselves go by): when each was last heard, and after the kill, whether
// the survivors' latest records share every partition between them.
type presenceTracker struct {
	parts  int
	killed string

	mu      sync.Mutex
	last    map[string]wire.NodeRecord
	heard   map[string]time.Time
	t0      time.Time
	p       foPresence
	covered time.Time // since when the survivors cover every partition; zero when they do not
}

func (t *presenceTracker) heardMsg(m *nats.Msg) {
	var r wire.NodeRecord
	if json.Unmarshal(m.Data, &r) != nil || r.Node == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard[r.Node] = now
	if r.Leaving {
		delete(t.last, r.Node)
	} else {
		t.last[r.Node] = r
	}
	if t.t0.IsZero() {
		return
	}
	at := now.Sub(t.t0)
	seen := map[int]int{}
	for id, x := range t.last {
		if id == t.killed {
			continue
		}
		for _, q := range x.Partitions {
			seen[q]++
		}
	}
	double := 0
	for _, k := range seen {
		if k > 1 {
			double++
		}
	}
	if double > 0 {
		if t.p.doubleFrom == 0 {
			t.p.doubleFrom = at
		}
		t.p.doubleUntil, t.p.doubleMax = at, max(t.p.doubleMax, double)
	}
	switch {
	case double > 0 || len(seen) != t.parts:
		t.covered, t.p.rebalanced = time.Time{}, 0
	case t.covered.IsZero():
		t.covered, t.p.rebalanced = now, at
	}
}

// killedAt marks the kill and returns how long before it the killed node was
// last heard.
func (t *presenceTracker) killedAt(t0 time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = t0
	delete(t.last, t.killed)
	if h, ok := t.heard[t.killed]; ok {
		return t0.Sub(h)
	}
	return 0
}

// settled reports whether the survivors have covered every partition for d.
func (t *presenceTracker) settled(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.covered.IsZero() && time.Since(t.covered) >= d
}

func (t *presenceTracker) result() foPresence {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

func countType(evs []event.Event, typ event.Type) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func replayLog(ctx context.Context, b *bus.Bus, sid string) []event.Event {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	evs, _, err := b.Replay(rctx, sid, 0)
	if err != nil {
		return nil
	}
	return evs
}
