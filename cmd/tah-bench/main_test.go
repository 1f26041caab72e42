package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/bench"
)

func TestParse(t *testing.T) {
	var stderr bytes.Buffer
	c, o, err := parse([]string{"-rows", "2, 7", "-durability", "0,1m", "-resume-events", "100,500", "-failover-lead", "TAH_EVT,TAH_IN", "-scale-sessions", "50", "-scale-curve", "1,3", "-scale-quota", "0.4", "-scale-floor", "3", "-failover-cutoff=false", "-agent-prompts", "7", "-out", ""}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Rows, []string{"2", "7"}) || !slices.Equal(c.Durability, []time.Duration{0, time.Minute}) ||
		!slices.Equal(c.ResumeLengths, []int{100, 500}) || !slices.Equal(c.FailoverLead, []string{"TAH_EVT", "TAH_IN"}) || c.ScaleSessions != 50 ||
		!slices.Equal(c.ScaleCurve, []int{1, 3}) || c.ScaleQuota != 0.4 || !slices.Equal(c.ScaleFloor, []int{3}) || c.FailoverCutOff || c.AgentPrompts != 7 || o.out != "" {
		t.Fatalf("config %+v, options %+v", c, o)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	q, _, err := parse([]string{"-quick", "-sessions", "5000"}, &stderr)
	if err != nil || !q.Quick || q.LoadSessions != bench.Default().QuickSizes().LoadSessions {
		t.Fatalf("quick: %+v, %v", q, err)
	}
	for _, bad := range [][]string{{"-durability", "soon"}, {"-resume-events", "many"}, {"-scale-curve", "1,x"}, {"-scale-floor", "x"}, {"-nope"}} {
		if _, _, err := parse(bad, &stderr); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, _, err := parse([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "-failover-kill") {
		t.Fatalf("-h: %v\n%s", err, stderr.String())
	}
	_, o, err = parse([]string{"-" + bench.NodeFlag, "--", "--data-dir=x", "--nats-port=1"}, &stderr)
	if err != nil || !o.node || !slices.Equal(o.nodeArgs([]string{"-" + bench.NodeFlag, "--", "--data-dir=x", "--nats-port=1"}), []string{"--data-dir=x", "--nats-port=1"}) {
		t.Fatalf("node mode: %+v, %v", o, err)
	}
}

// -render writes benchmarks.md again from the committed JSON.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-render", "../../docs/benchmarks.json", "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "| 2 | time per LLM step") || !strings.Contains(string(md), "## Targets") {
		t.Fatalf("table:\n%s\nmarkdown:\n%.400s", stdout.String(), md)
	}
}

// A bad configuration is refused before anything starts.
func TestRunRefusesBadConfig(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-rows", "13", "-out", ""}, &stdout, &stderr)
	if !errors.Is(err, bench.ErrInvalidConfig) {
		t.Fatalf("%v", err)
	}
}
