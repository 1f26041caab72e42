package bench

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeScenario records what the runner calls, and fails where it is told to.
type fakeScenario struct {
	name      string
	failSetup bool
	fatalRun  bool // the harness ends the scenario (TB.Fatalf)
	failRun   bool
	calls     *[]string
}

func (f *fakeScenario) Name() string { return f.name }

func (f *fakeScenario) Setup(_ context.Context, env Env) error {
	*f.calls = append(*f.calls, f.name+" setup")
	env.TB.Logf("harness line of %s", f.name)
	if f.failSetup {
		return errors.New("no node")
	}
	env.TB.Cleanup(func() { *f.calls = append(*f.calls, f.name+" cleanup") })
	if f.fatalRun {
		env.TB.Fatalf("the cluster did not start")
	}
	return nil
}

func (f *fakeScenario) Run(context.Context, *Report) error {
	*f.calls = append(*f.calls, f.name+" run")
	if f.failRun {
		return errors.New("measure failed")
	}
	return nil
}

func (f *fakeScenario) Teardown(context.Context) error {
	*f.calls = append(*f.calls, f.name+" teardown")
	return nil
}

// A scenario is torn down whatever happened, after its run and before what
// the harness started for it stops; a failure says where, and prints the
// end of the harness's log.
func TestRunScenario(t *testing.T) {
	for _, tc := range []struct {
		sc        fakeScenario
		want      []string
		wantErr   string
		wantPrint bool
	}{
		{fakeScenario{name: "ok"}, []string{"ok setup", "ok run", "ok teardown", "ok cleanup"}, "", false},
		{fakeScenario{name: "setup", failSetup: true}, []string{"setup setup", "setup teardown"}, "setup: no node", true},
		{fakeScenario{name: "fatal", fatalRun: true}, []string{"fatal setup", "fatal teardown", "fatal cleanup"}, "the cluster did not start", true},
		{fakeScenario{name: "run", failRun: true}, []string{"run setup", "run run", "run teardown", "run cleanup"}, "measure failed", true},
	} {
		var calls []string
		sc := tc.sc
		sc.calls = &calls
		var log bytes.Buffer
		hl, err := openHarnessLog("")
		if err != nil {
			t.Fatal(err)
		}
		err = runScenario(context.Background(), &sc, &Report{}, &log, hl)
		if !slices.Equal(calls, tc.want) {
			t.Errorf("%s: calls %v, want %v", sc.name, calls, tc.want)
		}
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want %q", sc.name, err, tc.wantErr)
		}
		if printed := strings.Contains(log.String(), "harness line of "+sc.name); printed != tc.wantPrint {
			t.Errorf("%s: harness log printed %v, want %v:\n%s", sc.name, printed, tc.wantPrint, log.String())
		}
	}
}

// The rows asked for give their scenarios, in order, one per durability
// setting for rows 1-3 and 8, two for row 7 (the kill and the cut-off
// case), one per cluster for row 9 (its six: one node before and after
// the four three-node clusters; the floor's two and the curve's four).
func TestScenarios(t *testing.T) {
	c := Default()
	var names []string
	for _, sc := range Scenarios(c) {
		names = append(names, sc.Name())
	}
	if len(names) != 1+2+2+5+2+12+1+1+1 || !strings.HasPrefix(names[0], "row 1") || !strings.HasPrefix(names[len(names)-1], "row 12") {
		t.Fatalf("scenarios %v", names)
	}
	c.Rows, c.Durability = []string{"3"}, []time.Duration{time.Minute}
	if sc := Scenarios(c); len(sc) != 1 || !strings.Contains(sc[0].Name(), "fsync every 1m") {
		t.Fatalf("row 3 at 1m: %v", sc)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	q := Default().QuickSizes()
	if err := q.Validate(); err != nil || !q.Quick || q.LoadSessions >= Default().LoadSessions {
		t.Fatalf("quick %+v: %v", q, err)
	}
	for _, edit := range []func(*Config){
		func(c *Config) { c.Rows = []string{"13"} },
		func(c *Config) { c.Tenants = 1 },
		func(c *Config) { c.TenantSessions = c.Tenants - 1 },
		func(c *Config) { c.TenantTurns = 0 },
		func(c *Config) { c.AgentPrompts = 0 },
		func(c *Config) { c.PeerSessionTurns = 0 },
		func(c *Config) { c.UISteps = 0 },
		func(c *Config) { c.ScaleDuration = 0 },
		func(c *Config) { c.ScaleQuota = 0 },
		func(c *Config) { c.ScaleCurve = []int{1, 0} },
		func(c *Config) { c.ScaleFloor = []int{3, 2} },
		func(c *Config) { c.Durability = nil },
		func(c *Config) { c.Durability = []time.Duration{-time.Second} },
		func(c *Config) { c.ResumeLengths = []int{5} },
		func(c *Config) { c.ResumeLengths = []int{1000, 100} },
		func(c *Config) { c.FailoverKill = "nicely" },
		func(c *Config) { c.FailoverSessions = 0 },
		func(c *Config) { c.Steps = 1 },
	} {
		c := Default()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
}
