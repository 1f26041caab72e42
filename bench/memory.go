package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// MemoryResult is row 6: resident memory of one node per active and per
// passivated session. The node runs in this process with its embedded NATS
// server, so the figures include the log's and the read model's share.
type MemoryResult struct {
	Sessions int `json:"sessions"`
	// Active is how many actors were alive at the first measure.
	Active      int           `json:"active"`
	Build       time.Duration `json:"build_ns"`
	Passivation time.Duration `json:"passivation_wait_ns"`
	IdleTimeout time.Duration `json:"idle_timeout_ns"`

	BaseRSS    int64 `json:"base_rss_bytes"`
	ActiveRSS  int64 `json:"active_rss_bytes"`
	PassiveRSS int64 `json:"passivated_rss_bytes"`
	BaseHeap   int64 `json:"base_heap_bytes"`
	ActiveHeap int64 `json:"active_heap_bytes"`
	// PassiveHeap is the Go heap in use after passivation.
	PassiveHeap int64 `json:"passivated_heap_bytes"`

	PerActive          int64 `json:"rss_per_active_bytes"`
	PerPassive         int64 `json:"rss_per_passivated_bytes"`
	HeapPerActive      int64 `json:"heap_per_active_bytes"`
	HeapPerPassive     int64 `json:"heap_per_passivated_bytes"`
	GoroutinesActive   int   `json:"goroutines_active"`
	GoroutinesPassive  int   `json:"goroutines_passivated"`
	GoroutinesBaseline int   `json:"goroutines_base"`

	// ClientConsumers are the consumers of the log's shards the client's
	// turns left on the server when the build ended: none, since a Turn asked
	// only for its outcome follows no log (a first version of the client left one a
	// turn, counted here as the sessions' memory).
	ClientConsumers int `json:"client_consumers,omitempty"`
}

// memoryScenario is row 6 on a node with fsync every 2 minutes (the
// durability does not change what is kept in memory, and builds 10,000
// sessions faster). Each session gets one turn of one LLM call from a
// provider that keeps nothing, then stays idle until its actor passivates.
type memoryScenario struct {
	cfg  Config
	idle time.Duration
	st   *stack
}

// passivateWithin is how long after their idle timeout the actors must all
// have passivated.
const passivateWithin = 2 * time.Minute

func (s *memoryScenario) Name() string {
	return fmt.Sprintf("row 6: memory at %d sessions (waits for the actors to passivate)", s.cfg.MemSessions)
}

func (s *memoryScenario) sid(i int) string { return fmt.Sprintf("s_mem%06d", i) }

func (s *memoryScenario) Setup(_ context.Context, env Env) error {
	s.idle = time.Minute // longer than the build: every actor is alive at the first measure
	if s.cfg.Quick {
		s.idle = 10 * time.Second
	}
	var err error
	s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: 2 * time.Minute, provider: quiet{}, session: session.Config{IdleTimeout: s.idle}})
	return err
}

func (s *memoryScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

func (s *memoryScenario) Run(ctx context.Context, rep *Report) error {
	n := s.cfg.MemSessions
	res := &MemoryResult{Sessions: n, IdleTimeout: s.idle}
	res.BaseRSS, res.BaseHeap, res.GoroutinesBaseline = memNow()
	own, err := s.consumers(ctx)
	if err != nil {
		return err
	}
	if err := s.build(ctx, res, own); err != nil {
		return err
	}
	nd := s.st.node()
	res.Active = nd.ActiveSessions()
	res.ActiveRSS, res.ActiveHeap, res.GoroutinesActive = memNow()

	t := time.Now()
	err = natstest.Poll(s.idle+passivateWithin, 500*time.Millisecond, func() error {
		if a := nd.ActiveSessions(); a > 0 {
			return fmt.Errorf("%d session actors still active %v after their idle timeout", a, passivateWithin)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Passivation = time.Since(t)
	time.Sleep(time.Second) // let the stopped actors' last messages drain
	res.PassiveRSS, res.PassiveHeap, res.GoroutinesPassive = memNow()
	if s.cfg.MemProfile != "" {
		if f, err := os.Create(s.cfg.MemProfile); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	res.PerActive = (res.ActiveRSS - res.BaseRSS) / int64(max(1, res.Active))
	res.PerPassive = (res.PassiveRSS - res.BaseRSS) / int64(n)
	res.HeapPerActive = (res.ActiveHeap - res.BaseHeap) / int64(max(1, res.Active))
	res.HeapPerPassive = (res.PassiveHeap - res.BaseHeap) / int64(n)
	rep.Memory = res
	return nil
}

// build creates the sessions and runs one turn of each, then counts the
// consumers of the log's shards other than own (the node's) that the turns
// left.
func (s *memoryScenario) build(ctx context.Context, res *MemoryResult, own map[string]bool) error {
	begin := time.Now()
	if err := parallel(ctx, s.cfg.MemSessions, 64, func(i int) error {
		sid := s.sid(i)
		if err := s.st.create(ctx, sid); err != nil {
			return err
		}
		_, _, err := s.st.run(ctx, sid, input(sid, 0))
		return err
	}); err != nil {
		return err
	}
	res.Build = time.Since(begin)
	all, err := s.consumers(ctx)
	if err != nil {
		return err
	}
	for name := range all {
		if !own[name] {
			res.ClientConsumers++
		}
	}
	return nil
}

// consumers are the names of the consumers of the log's shards.
func (s *memoryScenario) consumers(ctx context.Context) (map[string]bool, error) {
	b := s.st.node().Bus()
	out := map[string]bool{}
	for k := range b.Shards() {
		st, err := b.JetStream().Stream(ctx, wire.EventShardStream(k))
		if err != nil {
			return nil, err
		}
		names := st.ConsumerNames(ctx)
		for name := range names.Name() {
			out[wire.EventShardStream(k)+"/"+name] = true
		}
		if err := names.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// memNow returns the resident set size (VmRSS), the Go heap in use and the
// number of goroutines, after a collection that returns freed memory to the
// system.
func memNow() (rss, heap int64, goroutines int) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return vmRSS(), int64(ms.HeapInuse), runtime.NumGoroutine()
}

// vmRSS reads VmRSS from /proc/self/status, in bytes (0 where there is none).
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
