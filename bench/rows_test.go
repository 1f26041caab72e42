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
	// A tool step writes two records of four events (the previous tool's
	// result with the llm.started, the answer with the tool's start).
	if s := rep.Step[0]; s.PerStep <= 0 || s.FloorAppendPerStep <= 0 || s.ClientRun <= 0 || s.EventsPerStep != 4 || s.RecordsPerStep != 2 ||
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
	if r := rep.Resume; len(r.Lengths) != 2 || r.Lengths[1].Events < 40 || r.Lengths[0].FirstCall <= 0 || r.StreamEvents == 0 {
		t.Errorf("row 4: %+v", r)
	}
	if table := rep.Table(); len(rep.rows()) < 8 || table == "" || !strings.Contains(table, "the same CPU with tracing on") {
		t.Errorf("table:\n%s", table)
	}
}
