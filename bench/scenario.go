package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/tah-dev/tah/tahtest/natstest"
)

// Scenario is one row of the table (or one durability setting of a row):
// Setup starts what it measures on (a node, a cluster) and its client, Run
// measures and adds its result to the report, Teardown stops what Setup
// started that the harness does not stop by itself. The runner calls
// Teardown whatever happened before, once Setup was called.
type Scenario interface {
	// Name says what the scenario measures, for the progress log and errors.
	Name() string
	Setup(ctx context.Context, env Env) error
	Run(ctx context.Context, rep *Report) error
	Teardown(ctx context.Context) error
}

// Env is what the runner gives a scenario's Setup.
type Env struct {
	// TB is the harness's (tahtest.Start, Kill, ...): its Fatalf ends the
	// scenario, which is then torn down, and everything the harness started
	// for it stops once it is.
	TB natstest.TB
	// Log gets the scenario's progress notes (Note).
	Log io.Writer
}

// Note writes a progress note of the scenario, indented under its name.
func (e Env) Note(format string, args ...any) {
	fmt.Fprintf(e.Log, "      "+format+"\n", args...)
}

// Scenarios are the scenarios of the rows c asks for, in the order they run.
func Scenarios(c Config) []Scenario {
	var out []Scenario
	if c.runs("1") || c.runs("2") {
		out = append(out, &sqliteScenario{cfg: c})
		for _, d := range c.Durability {
			out = append(out, &stepScenario{cfg: c, sync: d})
		}
	}
	if c.runs("3") {
		for _, d := range c.Durability {
			out = append(out, &loadScenario{cfg: c, sync: d})
		}
	}
	if c.runs("4") {
		out = append(out, &resumeScenario{cfg: c})
	}
	if c.runs("5") {
		out = append(out, &deltaScenario{cfg: c})
	}
	if c.runs("6") {
		out = append(out, &memoryScenario{cfg: c})
	}
	if c.runs("7") {
		out = append(out, &failoverScenario{cfg: c})
		if c.FailoverCutOff {
			out = append(out, &failoverScenario{cfg: c, cut: true})
		}
	}
	if c.runs("8") {
		for _, d := range c.Durability {
			out = append(out, &peerScenario{cfg: c, sync: d})
		}
	}
	if c.runs("9") {
		for _, sp := range scaleSpecs(c) {
			out = append(out, &scaleScenario{cfg: c, spec: sp})
		}
	}
	if c.runs("10") {
		out = append(out, &uiScenario{cfg: c})
	}
	if c.runs("11") {
		out = append(out, &agentScenario{cfg: c})
	}
	if c.runs("12") {
		out = append(out, &tenantsScenario{cfg: c})
	}
	return out
}
