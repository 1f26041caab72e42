package bench

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// Rows 1 to 4 at tiny sizes (row 9, clusters of processes in cgroups, has a
// test of its own), on real nodes, driven through the client: the
// report has every figure the table needs.
func TestRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nodes: not in -short")
	}
	c := Default()
	c.Rows, c.Durability, c.Tmp = []string{"1", "2", "3", "4"}, []time.Duration{2 * time.Minute}, t.TempDir()
	c.Steps, c.StepTurns = 3, 1
	c.LoadSessions, c.LoadDelay, c.LoadSteps = 4, time.Millisecond, 2
	c.ResumeLengths, c.ResumeOthers, c.ResumeRepeats = []int{20, 60}, 3, 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SQLiteRowP50 <= 0 || len(rep.Step) != 1 || len(rep.Load) != 1 || rep.Resume == nil {
		t.Fatalf("report %+v", rep)
	}
	// A tool step writes four events in one record (the noop tool is the
	// node's own and idempotent, so its start waits for its end: runTools),
	// or two when the machine held it past quietStart.
	if s := rep.Step[0]; s.PerStep <= 0 || s.FloorAppendPerStep <= 0 || s.ClientRun <= 0 || s.EventsPerStep != 4 || s.RecordsPerStep < 1 || s.RecordsPerStep > 2 ||
		s.StepRecordP50 <= 0 || s.OneEventP50 <= 0 || s.StepRecordBytesMean <= s.EventBytesMean || s.CPUPerStep <= 0 || s.TurnEnd <= 0 ||
		s.AllocsPerStep <= 0 || s.AllocBytesPerStep < s.AllocsPerStep {
		t.Errorf("row 2: %+v", s)
	}
	// Rounds of a turn with tracing on (exported to the receiver) and one off.
	if s := rep.Step[0]; s.TracedTurns != 1 || s.TracedPerStep <= 0 || s.TracedCPUPerStep <= 0 || s.UntracedPerStep <= 0 || s.UntracedCPUPerStep <= 0 ||
		s.TracedCPURatio <= 0 || s.TracedAllocsPerStep <= 0 || s.UntracedAllocsPerStep <= 0 || s.TracedOTLPBytesPerStep <= 0 {
		t.Errorf("row 2 with tracing on: %+v", s)
	}
	if l := rep.Load[0]; l.Steps != 8 || l.StepsPerSec <= 0 || l.FloorWall <= 0 || l.RecordsPerTurn == 0 || l.EventsPerTurn <= l.RecordsPerTurn ||
		l.DiskBound <= 0 || l.WritesPerStep <= 0 || l.ModelBound <= 0 {
		t.Errorf("row 3: %+v", l)
	}
	// The disk's bound counts a turn's input (its store and its removal) with
	// its records, one at least (how many varies by session: a quick step is
	// one record or two).
	if l := rep.Load[0]; l.WritesPerStep*float64(c.LoadSteps) < float64(inputWrites+1)-0.01 {
		t.Errorf("row 3: %.2f writes a step over %d steps a turn, fewer than the turn's input (%d) and one record", l.WritesPerStep, c.LoadSteps, inputWrites)
	}
	if r := rep.Resume; len(r.Lengths) != 2 || r.Lengths[1].Events < 40 || r.Lengths[0].FirstCall <= 0 || r.StreamEvents == 0 {
		t.Errorf("row 4: %+v", r)
	}
	if table := rep.Table(); len(rep.rows()) < 8 || table == "" || !strings.Contains(table, "the same CPU with tracing on") {
		t.Errorf("table:\n%s", table)
	}
}

// Row 8's TAH side at tiny sizes (the peers are tested on their own): the
// concurrent sessions and their floor, the same turns' records appended by
// NATS alone, each with every step counted.
func TestRowEightFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node: not in -short")
	}
	c := Default()
	c.Rows, c.Durability, c.Tmp, c.RestateDir = []string{"8"}, []time.Duration{2 * time.Minute}, t.TempDir(), ""
	c.PeerSteps, c.PeerTurns, c.PeerSessions, c.PeerSessionTurns = 3, 1, 3, 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Peer == nil || len(rep.Peer.Rows) != 1 {
		t.Fatalf("row 8: %+v", rep.Peer)
	}
	p := rep.Peer.Rows[0]
	for name, m := range map[string]*PeerConcurrent{"TAH": p.TAHConcurrent, "its floor": p.NATSFloor} {
		if m == nil || m.Steps != 18 || m.StepsPerSec <= 0 || m.PerStep <= 0 || m.CPUPerStep <= 0 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if table := rep.Table(); !strings.Contains(table, "NATS alone: ") {
		t.Errorf("table:\n%s", table)
	}
}

// Where the appends alone cannot make 1.5x Restate's rate, the floor sets
// row 8's target (a share of the floor) and the Restate line says why it
// is missed.
func TestRowEightFloorSetsTheTarget(t *testing.T) {
	conc := func(rate float64) *PeerConcurrent {
		return &PeerConcurrent{Steps: 960, StepsPerSec: rate, PerStep: time.Millisecond, CPUPerStep: time.Millisecond}
	}
	row := &PeerRow{Durability: "fsync always", TAHPerStep: time.Millisecond, TAHConcurrent: conc(1000), NATSFloor: conc(1200),
		Restate: &RestatePeer{Setting: restateFsync, PerStep: 2 * time.Millisecond, Concurrent: conc(1000)}}
	rep := &Report{Peer: &PeerResult{Steps: 20, Turns: 5, Sessions: 16, SessionTurns: 3}}
	rows := rep.restateRows(row)
	if len(rows) != 3 || !strings.Contains(rows[1].verdict, "beyond the floor: NATS alone makes 1.2× Restate's") ||
		!strings.Contains(rows[2].target, "≥ 80% of it") || rows[2].verdict != "met" || rows[2].ratio != "83% of it" {
		t.Fatalf("rows %+v", rows)
	}
	row.NATSFloor = conc(3000) // the floor allows 1.5x: no target of its own
	if rows := rep.restateRows(row); rows[2].target != "" || strings.Contains(rows[1].verdict, "floor") {
		t.Fatalf("rows %+v", rows)
	}
}
