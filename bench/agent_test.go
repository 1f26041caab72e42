package bench

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// Row 11 at a tiny size, on a real node with its agent gateway and a caller
// of the protocol: every path's figures are there, and the table, the
// targets and the methods say so.
func TestAgentRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node: not in -short")
	}
	c := Default()
	c.Rows, c.Tmp, c.AgentPrompts = []string{"11"}, t.TempDir(), 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Agent
	if a == nil || a.New == nil || a.Continue == nil || a.ClientNew == nil || a.ClientContinue == nil {
		t.Fatalf("row 11: %+v", a)
	}
	for _, p := range []*AgentPath{a.New, a.Continue, a.ClientNew, a.ClientContinue} {
		if p.Turns != 2 || p.FirstP50 <= 0 || p.EndP50 < p.FirstP50 || p.EndP95 < p.EndP50 || p.ModelFirstP50 <= 0 || p.ModelWholeP50 < p.ModelFirstP50 {
			t.Errorf("%s: %+v", p.Via, p)
		}
	}
	// Only the agent protocol has an ack; the client's paths have none.
	if a.New.AckP50 <= 0 || a.Continue.AckP50 <= 0 || a.ClientNew.AckP50 != 0 || a.ClientContinue.AckP50 != 0 {
		t.Errorf("acks: %v %v %v %v", a.New.AckP50, a.Continue.AckP50, a.ClientNew.AckP50, a.ClientContinue.AckP50)
	}
	if a.New.Via != "agents.prompt.tah.tah.new" || a.Continue.Via != "agents.prompt.tah.tah.<sid>" {
		t.Errorf("via %q, %q", a.New.Via, a.Continue.Via)
	}
	if n, k := a.OverClient(); n <= 0 || k <= 0 {
		t.Errorf("over the client: %v, %v", n, k)
	}
	table := rep.Table()
	if strings.Count(table, "| 11 | ") != 5 || !strings.Contains(table, "| 11 | the agent protocol's terminator over TAH's own client's outcome") {
		t.Errorf("the table lacks row 11:\n%s", table)
	}
	md := rep.markdown(table)
	for _, want := range []string{"11. **A turn over the agent protocol.**", "| 11 | 2 turns of each of four paths after a warm-up turn each way", "- **Row 11, a turn over the agent protocol", "### The agent protocol"} {
		if !strings.Contains(md, want) {
			t.Errorf("the markdown lacks %q", want)
		}
	}
	// The report's JSON keeps the row for -render.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Agent == nil || back.Agent.Continue.EndP50 != a.Continue.EndP50 || back.Sizes.AgentPrompts != 2 {
		t.Fatalf("round trip: %v %+v", err, back.Agent)
	}
}
