// Command tah-bench measures TAH against the durable writes it cannot avoid
// (package bench): `make bench` runs it, prints a table and writes
// docs/benchmarks.md and docs/benchmarks.json. This main only reads the
// flags into a bench.Config and hands it to bench.Run; `tah-bench -h` lists
// the sizes and diagnostics.
//
//	go run ./cmd/tah-bench -out docs         # the full run, about 6 minutes on 2 cores
//	go run ./cmd/tah-bench -quick -out ""    # a smoke run, the table on stdout only
//
// The rows run it again as sub-processes: as row 5's delta subscriber
// (-delta-subscriber) and as row 7's victim, a tah-node (-tah-node -- ARGS).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/bench"
	"github.com/tah-dev/tah/cmd/node/nodecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var nerr *nodecmd.Error
	switch {
	case errors.As(err, &nerr):
		nodecmd.Report(os.Stderr, err)
		os.Exit(nodecmd.ExitCode(err))
	case err != nil:
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// options are what the flags say besides the Config: what to do with the
// report, and the sub-process modes.
type options struct {
	out, render, cpuProfile string
	deltaSubscriber         string
	node                    bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case o.node:
		return nodecmd.Run(ctx, o.nodeArgs(args), stdout, stderr)
	case o.deltaSubscriber != "":
		return bench.DeltaSubscriber(ctx, o.deltaSubscriber, stdout)
	case o.render != "":
		return bench.Rerender(o.render, o.out, stdout)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, c, stderr)
	if err != nil {
		return err
	}
	table := rep.Table()
	fmt.Fprint(stdout, table)
	if o.out == "" {
		return nil
	}
	return rep.Write(o.out, table)
}

// nodeArgs are tah-node's arguments: those after "--".
func (o options) nodeArgs(args []string) []string {
	for i, a := range args {
		if a == "--" {
			return args[i+1:]
		}
	}
	return nil
}

// parse reads the flags into a bench.Config (the defaults, or QuickSizes
// with -quick, under what the flags set) and the options.
func parse(args []string, stderr io.Writer) (bench.Config, options, error) {
	fs := flag.NewFlagSet("tah-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := bench.Default()
	var o options
	var rows, lengths, syncs, lead, curve, floor string
	var quick bool
	fs.StringVar(&o.out, "out", "docs", "write benchmarks.md and benchmarks.json to this directory (empty: stdout only)")
	fs.StringVar(&c.Tmp, "tmp", "", "parent directory of the temporary stores (default: the system's)")
	fs.StringVar(&rows, "rows", strings.Join(c.Rows, ","), "the rows to run")
	fs.StringVar(&syncs, "durability", "0,2m", "rows 1-3 and 8: the bus.Config.SyncInterval settings to run (0: fsync every write)")
	fs.BoolVar(&quick, "quick", false, "small sizes for a smoke run (they replace the size flags)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "row 2: tool steps in the measured turn")
	fs.IntVar(&c.StepTurns, "step-turns", c.StepTurns, "row 2: measured turns (the median of the times is reported, the mean of the CPU and the allocations)")
	fs.IntVar(&c.LoadSessions, "sessions", c.LoadSessions, "row 3: concurrent sessions")
	fs.DurationVar(&c.LoadDelay, "llm-delay", c.LoadDelay, "row 3: how long the mock takes to answer")
	fs.IntVar(&c.LoadSteps, "load-steps", c.LoadSteps, "row 3: LLM steps a turn")
	fs.IntVar(&c.LoadTurns, "load-turns", c.LoadTurns, "row 3: measured turns per session (after one warm-up turn)")
	fs.BoolVar(&c.PauseReadModel, "pause-read-model", false, "rows 2-3, diagnostic: stop the read model's projector during the measured turns")
	fs.StringVar(&c.PhaseProfile, "cpuprofile-load", "", "rows 2-3, diagnostic: write a CPU profile of row 3's measured turns only to this file (and of row 2's last measured turn to FILE.row2-<sync>, its other measured turns to FILE.row2-<sync>.<session>: merge them with go tool pprof)")
	fs.BoolVar(&c.PhaseBlocking, "blockprofile-load", false, "with -cpuprofile-load: also write the same phases' mutex and block profiles to FILE.mutex and FILE.block (recording them costs CPU, which the CPU profile then shows)")
	fs.StringVar(&lengths, "resume-events", "100,1000,10000,100000", "row 4: history lengths in events")
	fs.IntVar(&c.ResumeOthers, "resume-others", c.ResumeOthers, "row 4: other sessions interleaved in the stream")
	fs.IntVar(&c.ResumeBudget, "resume-budget", c.ResumeBudget, "row 4: the sessions' context budget in characters (ContextChars)")
	fs.IntVar(&c.ResumeRepeats, "resume-repeats", c.ResumeRepeats, "row 4: resumes per length (the median is reported)")
	fs.IntVar(&c.DeltaTokens, "delta-tokens", c.DeltaTokens, "row 5: tokens streamed")
	fs.DurationVar(&c.DeltaPace, "delta-pace", c.DeltaPace, "row 5: pause between two tokens")
	fs.IntVar(&c.MemSessions, "mem-sessions", c.MemSessions, "row 6: sessions")
	fs.StringVar(&c.MemProfile, "memprofile", "", "row 6: write a heap profile after passivation to this file")
	fs.IntVar(&c.FailoverSessions, "failover-sessions", c.FailoverSessions, "row 7: sessions of the killed node with a turn in flight (and as many idle ones sent an input after the kill)")
	fs.StringVar(&c.FailoverKill, "failover-kill", c.FailoverKill, "row 7: how the node is killed: process (a tah-node process of its own, SIGKILL) or shutdown (an in-process node, its embedded server shut down at once)")
	fs.BoolVar(&c.FailoverCutOff, "failover-cutoff", c.FailoverCutOff, "row 7: also the cut-off case: the victim process sent SIGSTOP (no FIN: the others see only silence), then SIGCONT once the others took over")
	fs.StringVar(&lead, "failover-lead", "", "row 7, diagnostic: streams (comma-separated, e.g. TAH_EVT_0,TAH_IN) whose leadership moves to the node to kill before the kill")
	fs.IntVar(&c.ScaleSessions, "scale-sessions", c.ScaleSessions, "row 9: sessions running turns back to back on each cluster")
	fs.DurationVar(&c.ScaleDuration, "scale-duration", c.ScaleDuration, "row 9: the measured window of each cluster (after a ramp)")
	fs.DurationVar(&c.ScaleDelay, "scale-llm-delay", c.ScaleDelay, "row 9: how long the model (over HTTP) takes to answer")
	fs.Float64Var(&c.ScaleQuota, "scale-quota", c.ScaleQuota, "row 9: each node's CPU quota in CPUs (a cgroup v1 cpu controller; needs root)")
	fs.DurationVar(&c.ScaleSync, "scale-durability", c.ScaleSync, "row 9: the nodes' bus.Config.SyncInterval (0: fsync every write; they share one disk)")
	fs.StringVar(&curve, "scale-curve", "1,2,3,5", "row 9: node counts of the curve at -scale-curve-quota (empty: no curve)")
	fs.StringVar(&floor, "scale-floor", "3,5", "row 9: server counts of the floor at R3, the NATS servers alone in the same quotas (empty: no floor)")
	fs.Float64Var(&c.ScaleCurveQuota, "scale-curve-quota", c.ScaleCurveQuota, "row 9: each node's CPU quota in the curve")
	fs.IntVar(&c.AgentPrompts, "agent-prompts", c.AgentPrompts, "row 11: measured turns of each path (a new session over the agent protocol, one session continued over it, the same two through client.Run)")
	fs.IntVar(&c.Tenants, "tenants", c.Tenants, "row 12: the tenants the many-tenant run spreads its sessions over")
	fs.IntVar(&c.TenantSessions, "tenant-sessions", c.TenantSessions, "row 12: the sessions of each run")
	fs.IntVar(&c.TenantTurns, "tenant-turns", c.TenantTurns, "row 12: the measured turns of each session")
	fs.StringVar(&c.Log, "log", "", "diagnostic: write the harness's log of every row (with row 7's nodes') to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&o.render, "render", "", "measure nothing: write benchmarks.md (to -out) again from this benchmarks.json")
	fs.StringVar(&o.deltaSubscriber, bench.DeltaSubscriberFlag, "", "internal: run as row 5's delta subscriber: URL,session,count")
	fs.BoolVar(&o.node, bench.NodeFlag, false, "internal: run as a tah-node (row 7's victim, row 9's nodes) with the arguments after --")
	if err := fs.Parse(args); err != nil {
		return c, o, err
	}
	var err error
	c.Rows, c.FailoverLead = list(rows), list(lead)
	if c.ResumeLengths, err = parseList(lengths, "a number of events", strconv.Atoi); err != nil {
		return c, o, fmt.Errorf("-resume-events: %w", err)
	}
	if c.Durability, err = parseList(syncs, "a sync interval (0 or a duration like 2m)", time.ParseDuration); err != nil {
		return c, o, fmt.Errorf("-durability: %w", err)
	}
	if c.ScaleCurve, err = parseList(curve, "a number of nodes", strconv.Atoi); err != nil {
		return c, o, fmt.Errorf("-scale-curve: %w", err)
	}
	if c.ScaleFloor, err = parseList(floor, "a number of servers", strconv.Atoi); err != nil {
		return c, o, fmt.Errorf("-scale-floor: %w", err)
	}
	if quick {
		c = c.QuickSizes()
	}
	return c, o, nil
}

// list splits a comma-separated flag, leaving out empty items.
func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseList parses each item of a comma-separated flag; what says what
// an item should be, for the error.
func parseList[T any](s, what string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, v := range list(s) {
		x, err := parse(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not %s", v, what)
		}
		out = append(out, x)
	}
	return out, nil
}
