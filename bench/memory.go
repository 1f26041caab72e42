package main

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
}

// benchMemory measures row 6 on a fresh node (fsync every 2 minutes: the
// durability setting does not change what is kept in memory, and builds
// 10,000 sessions faster). Each session gets one turn of one LLM call from a
// provider that keeps nothing, then stays idle until its actor passivates.
func benchMemory(ctx context.Context, cfg config) (*MemoryResult, error) {
	idle := 30 * time.Second
	if cfg.quick {
		idle = 10 * time.Second
	}
	st, err := startStack(ctx, stackOpts{tmp: cfg.tmp, sync: 2 * time.Minute, provider: quiet{}, session: session.Config{IdleTimeout: idle}})
	if err != nil {
		return nil, err
	}
	defer st.close(ctx, true)
	n := cfg.memSessions
	res := &MemoryResult{Sessions: n, IdleTimeout: idle}
	res.BaseRSS, res.BaseHeap, res.GoroutinesBaseline = memNow()
	sid := func(i int) string { return fmt.Sprintf("s_mem%06d", i) }
	begin := time.Now()
	if err := parallel(ctx, n, 64, func(i int) error {
		if err := st.create(ctx, sid(i)); err != nil {
			return err
		}
		_, err := st.run(ctx, sid(i), input(sid(i), 0))
		return err
	}); err != nil {
		return nil, err
	}
	res.Build = time.Since(begin)
	res.Active = st.n.Sessions.Active()
	res.ActiveRSS, res.ActiveHeap, res.GoroutinesActive = memNow()

	t := time.Now()
	deadline := t.Add(idle + 2*time.Minute)
	for st.n.Sessions.Active() > 0 {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d session actors still active %v after their idle timeout", st.n.Sessions.Active(), 2*time.Minute)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	res.Passivation = time.Since(t)
	time.Sleep(time.Second) // let the stopped actors' last messages drain
	res.PassiveRSS, res.PassiveHeap, res.GoroutinesPassive = memNow()
	if cfg.memProfile != "" {
		if f, err := os.Create(cfg.memProfile); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	res.PerActive = (res.ActiveRSS - res.BaseRSS) / int64(max(1, res.Active))
	res.PerPassive = (res.PassiveRSS - res.BaseRSS) / int64(n)
	res.HeapPerActive = (res.ActiveHeap - res.BaseHeap) / int64(max(1, res.Active))
	res.HeapPerPassive = (res.PassiveHeap - res.BaseHeap) / int64(n)
	return res, nil
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
