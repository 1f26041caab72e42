package bench

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// Row 10 at a tiny size: the pages render, and the table says so.
func TestUIRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node: not in -short")
	}
	c := Default()
	c.Rows, c.Tmp, c.UISessions, c.UISteps = []string{"10"}, t.TempDir(), 20, 15
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	u := rep.UI
	if u == nil || u.List <= 0 || u.Session <= 0 || u.SessionFirst <= 0 || u.SessionBytes < 15*500 {
		t.Fatalf("row 10: %+v", u)
	}
	if table := rep.Table(); !strings.Contains(table, "| 10 | UI, first render") {
		t.Errorf("the table lacks row 10:\n%s", table)
	}
	if md := rep.markdown(rep.Table()); !strings.Contains(md, "10. **The UI's first render.**") || !strings.Contains(md, "| 10 | 20 sessions") {
		t.Errorf("the markdown lacks row 10")
	}
}
