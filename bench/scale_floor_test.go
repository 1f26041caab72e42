package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
)

// The floor's turn is the records of the log's second turn on, each the
// events of one stream sequence, in order.
func TestSecondTurnRecords(t *testing.T) {
	ev := func(seq uint64, typ event.Type) event.Event { return event.Event{Seq: seq, Type: typ} }
	log := []event.Event{
		ev(1, event.SessionCreated), ev(2, event.TurnStarted), ev(3, event.LLMStarted), ev(4, event.AgentFinished),
		ev(5, event.TurnStarted), ev(5, event.LLMStarted), ev(6, event.LLMCompleted), ev(6, event.ToolStarted), ev(7, event.AgentFinished),
	}
	recs, err := secondTurnRecords(log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, recordName(r))
	}
	want := []string{string(event.TurnStarted) + "+" + string(event.LLMStarted), string(event.LLMCompleted) + "+" + string(event.ToolStarted), string(event.AgentFinished)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("records %v, want %v", got, want)
	}
	if _, err := secondTurnRecords(log[:4]); err == nil {
		t.Fatal("a log of one turn gave records")
	}
}

// The floor runs: three servers at R3 in their cgroups, a probe's turn
// learnt, writers outside the quotas appending it; the row reports the
// floor and TAH's share of it.
func TestScaleFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of processes: not in -short")
	}
	if err := checkCgroups(); err != nil {
		t.Skip(err)
	}
	c := Default()
	c.Rows, c.Tmp, c.Executable = []string{"9"}, t.TempDir(), os.Args[0]
	c.ScaleSessions, c.ScaleDelay, c.ScaleDuration = 6, 5*time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep := newReport(c)
	if err := runScenario(ctx, &scaleScenario{cfg: c, spec: scaleSpec{nodes: 3, replicas: 3, quota: 1, floor: true}}, rep, io.Discard, &harnessLog{}); err != nil {
		t.Fatal(err)
	}
	s := rep.Scale
	if s == nil || len(s.Floor) != 1 || len(s.Runs) != 0 {
		t.Fatalf("row 9: %+v", s)
	}
	f := s.Floor[0]
	// An append may fail on a loaded machine (the servers refuse one while an
	// earlier one of the subject is still being applied): the writer goes on
	// as another session, and the failure is counted and reported.
	if f.Steps <= 0 || f.StepsPerSec <= 0 || (f.Failed > 0) != (f.FirstFailure != "") || f.CPUPerStep <= 0 || len(f.NodeStats) != 3 || len(f.FloorRecords) < 2 || !f.Floor {
		t.Fatalf("floor %+v", f)
	}
	if f.Failed > 0 {
		t.Logf("%d appends failed, the first: %s", f.Failed, f.FirstFailure)
	}
	for _, nd := range f.NodeStats {
		if nd.CPU <= 0 || nd.ReadModel {
			t.Errorf("node %+v", nd)
		}
	}
	// Against the runs it is the floor of: TAH's share of it, and its
	// ratio over one node.
	s.Runs = []*ScaleRun{{Nodes: 1, Replicas: 1, ReadModels: 1, Quota: 1, StepsPerSec: f.StepsPerSec}, {Nodes: 3, Replicas: 3, ReadModels: 1, Quota: 1, StepsPerSec: f.StepsPerSec / 2}}
	if table := rep.Table(); !strings.Contains(table, "the floor: steps/s the NATS servers alone allow at R3") || !strings.Contains(table, "50% of it") ||
		!strings.Contains(table, "beyond what 3 servers allow") {
		t.Errorf("table:\n%s", table)
	}
	left, _ := filepath.Glob(filepath.Join(cgroupCPURoot, fmt.Sprintf("%s%d-*", cgroupPrefix, os.Getpid())))
	if len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}
