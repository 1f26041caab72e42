package bench

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// Row 12 at tiny sizes, on real nodes: three runs (the default tenant, one
// tenant, many), every figure the table needs, and the tenants' quotas
// counted (a turn of a tenant without usage fails the row).
func TestTenantsRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nodes: not in -short")
	}
	c := Default()
	c.Rows, c.Tmp = []string{"12"}, t.TempDir()
	c.Tenants, c.TenantSessions, c.TenantTurns = 3, 6, 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Tenants
	if r == nil || len(r.Phases) != 3 || r.Phases[2].Tenants != 3 || r.Phases[1].Tenants != 1 || r.Phases[0].Tenants != 0 ||
		r.TurnRatio <= 0 || r.OverDefault <= 0 {
		t.Fatalf("row 12: %+v", r)
	}
	for _, p := range r.Phases {
		if p.TurnP50 <= 0 || p.TurnP90 < p.TurnP50 || p.TurnsPerSec <= 0 {
			t.Errorf("row 12, %s: %+v", p.Name, p)
		}
	}
	if table := rep.Table(); !strings.Contains(table, "3 tenants, each with quotas, against one tenant") {
		t.Errorf("table:\n%s", table)
	}
}
