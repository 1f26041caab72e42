package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// config is the run's sizes and settings, from the flags.
type config struct {
	out   string // directory of benchmarks.md and benchmarks.json; empty: stdout only
	tmp   string
	rows  map[string]bool
	quick bool

	steps     int // row 2: tool steps in the measured turn
	stepTurns int // row 2: measured turns

	loadSessions int           // row 3
	loadDelay    time.Duration // row 3: the mock's delay
	loadSteps    int           // row 3: LLM steps a turn
	loadTurns    int           // row 3: measured turns per session

	resumeLengths []int // row 4: events in the resumed sessions' histories
	resumeOthers  int   // row 4: other sessions interleaved
	resumeBudget  int   // row 4: the context budget (ContextChars)
	resumeRepeats int

	deltaTokens int           // row 5
	deltaPace   time.Duration // row 5

	pauseReadModel bool   // row 3, diagnostic: no read model during the measured turns
	phaseProfile   string // row 3, diagnostic: a CPU profile of the measured turns only

	memSessions int    // row 6
	memProfile  string // row 6: a heap profile after passivation

	failoverSessions int      // row 7: sessions of the killed node with a turn in flight, and as many idle
	failoverLog      string   // row 7, diagnostic: the three nodes' logs
	failoverKill     string   // row 7: killShutdown or killProcess
	failoverLead     []string // row 7, diagnostic: streams whose leadership moves to the node to kill

	syncs []time.Duration // row 8: the durability settings
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tah-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var rows, lengths, syncs string
	var deltaSub, victim, lead, cpuProfile, render string
	fs.StringVar(&c.out, "out", "docs", "write benchmarks.md and benchmarks.json to this directory (empty: stdout only)")
	fs.StringVar(&c.tmp, "tmp", "", "parent directory of the temporary stores (default: the system's)")
	fs.StringVar(&rows, "rows", "1,2,3,4,5,6,7", "the rows to run")
	fs.StringVar(&syncs, "durability", "0,2m", "rows 1-3: the bus.Config.SyncInterval settings to run (0: fsync every write)")
	fs.BoolVar(&c.quick, "quick", false, "small sizes for a smoke run")
	fs.IntVar(&c.steps, "steps", 200, "row 2: tool steps in the measured turn")
	fs.IntVar(&c.stepTurns, "step-turns", 3, "row 2: measured turns (the median is reported)")
	fs.IntVar(&c.loadSessions, "sessions", 1000, "row 3: concurrent sessions")
	fs.DurationVar(&c.loadDelay, "llm-delay", 50*time.Millisecond, "row 3: how long the mock takes to answer")
	fs.IntVar(&c.loadSteps, "load-steps", 5, "row 3: LLM steps a turn")
	fs.IntVar(&c.loadTurns, "load-turns", 1, "row 3: measured turns per session (after one warm-up turn)")
	fs.BoolVar(&c.pauseReadModel, "pause-read-model", false, "rows 2-3, diagnostic: stop the read model's projector during the measured turns")
	fs.StringVar(&c.phaseProfile, "cpuprofile-load", "", "row 3, diagnostic: write a CPU profile of the last measured turns only to this file")
	fs.StringVar(&lengths, "resume-events", "100,1000,10000", "row 4: history lengths in events")
	fs.IntVar(&c.resumeOthers, "resume-others", 1000, "row 4: other sessions interleaved in the stream")
	fs.IntVar(&c.resumeBudget, "resume-budget", 4000, "row 4: the sessions' context budget in characters (ContextChars)")
	fs.IntVar(&c.resumeRepeats, "resume-repeats", 5, "row 4: resumes per length (the median is reported)")
	fs.IntVar(&c.deltaTokens, "delta-tokens", 2000, "row 5: tokens streamed")
	fs.DurationVar(&c.deltaPace, "delta-pace", time.Millisecond, "row 5: pause between two tokens")
	fs.IntVar(&c.memSessions, "mem-sessions", 10000, "row 6: sessions")
	fs.IntVar(&c.failoverSessions, "failover-sessions", 12, "row 7: sessions of the killed node with a turn in flight (and as many idle ones sent an input after the kill)")
	fs.StringVar(&c.failoverLog, "failover-log", "", "row 7, diagnostic: write the three nodes' logs (their servers' included) to this file")
	fs.StringVar(&c.failoverKill, "failover-kill", killProcess, "row 7: how the node is killed: shutdown (its embedded server shut down at once, in this process) or process (SIGKILL of a process of its own)")
	fs.StringVar(&lead, "failover-lead", "", "row 7, diagnostic: streams (comma-separated, e.g. TAH_EVT,TAH_IN) whose leadership moves to the node to kill before the kill")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&c.memProfile, "memprofile", "", "row 6: write a heap profile after passivation to this file")
	fs.StringVar(&render, "render", "", "measure nothing: write benchmarks.md (to -out) again from this benchmarks.json")
	fs.StringVar(&deltaSub, "delta-subscriber", "", "internal: run as the delta subscriber process: URL,session,count")
	fs.StringVar(&victim, "failover-victim", "", "internal: run as row 7's node to kill: its JSON spec")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.memProfile != "" {
		runtime.MemProfileRate = 4096
	}
	if deltaSub != "" {
		return deltaSubscriber(ctx, deltaSub, stdout)
	}
	if victim != "" {
		return failoverVictim(ctx, victim, stdout)
	}
	if render != "" {
		return rerender(render, c.out, stdout)
	}
	c.rows = map[string]bool{}
	for _, r := range strings.Split(rows, ",") {
		c.rows[strings.TrimSpace(r)] = true
	}
	for _, l := range strings.Split(lengths, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(l), &n); err != nil || n < 10 {
			return fmt.Errorf("-resume-events: %q is not a length of at least 10 events", l)
		}
		c.resumeLengths = append(c.resumeLengths, n)
	}
	if c.quick {
		c.steps, c.stepTurns = 50, 2
		c.loadSessions, c.loadTurns = 100, 1
		c.resumeLengths, c.resumeOthers, c.resumeRepeats = []int{100, 1000}, 100, 3
		c.deltaTokens = 300
		c.memSessions = 500
		c.failoverSessions = 4
	}
	for _, v := range strings.Split(syncs, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return fmt.Errorf("-durability: %q is not a sync interval (0 or a duration like 2m)", v)
		}
		c.syncs = append(c.syncs, d)
	}
	if c.failoverKill != killShutdown && c.failoverKill != killProcess {
		return fmt.Errorf("-failover-kill: %q is not %s or %s", c.failoverKill, killShutdown, killProcess)
	}
	for _, st := range strings.Split(lead, ",") {
		if st = strings.TrimSpace(st); st != "" {
			c.failoverLead = append(c.failoverLead, st)
		}
	}
	if c.failoverSessions < 1 {
		return fmt.Errorf("-failover-sessions: %d is not at least 1", c.failoverSessions)
	}
	if c.tmp == "" {
		c.tmp = os.TempDir()
	}
	runtime.GC()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := measure(ctx, c, stderr)
	if err != nil {
		return err
	}
	table := rep.table()
	fmt.Fprint(stdout, table)
	if c.out != "" {
		return rep.write(c.out, table)
	}
	return nil
}

// profilePhase starts a CPU profile of one measured phase when asked to, and
// returns the function that stops it.
func (c config) profilePhase() (stop func()) {
	if c.phaseProfile == "" {
		return func() {}
	}
	f, err := os.Create(c.phaseProfile)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(100000)
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		for _, name := range []string{"mutex", "block"} {
			if g, err := os.Create(c.phaseProfile + "." + name); err == nil {
				pprof.Lookup(name).WriteTo(g, 0)
				g.Close()
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}
}

// rerender writes the table and benchmarks.md again from a run's JSON, for
// when the prose changed and the numbers did not.
func rerender(path, out string, stdout io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	table := rep.table()
	fmt.Fprint(stdout, table)
	if out == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(out, "benchmarks.md"), []byte(rep.markdown(table)), 0o644)
}
