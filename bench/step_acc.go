package bench

import (
	"slices"
	"time"

	"github.com/tah-dev/tah/event"
)

// stepAcc gathers row 2's measured turns and their floors into a
// StepResult.
type stepAcc struct {
	res                                            *StepResult
	perStep, provider, caughtUp, floorStep, kvPuts []time.Duration
	clientRun                                      []time.Duration
	gaps, gapFloors, early, late, starts, ends     sample
	gapRatios                                      []float64
	appends, applies, stepAppends                  sample
	bytes, nEvents, nSteps, stepEvents             int
}

func newStepAcc(c Config, sync time.Duration) *stepAcc {
	return &stepAcc{res: &StepResult{Durability: durabilityName(sync), ToolSteps: c.Steps, LLMCalls: c.Steps + 1, Turns: c.StepTurns,
		LLMStartedBytesMin: 1 << 30}}
}

// add counts turn m and its floor f.
func (a *stepAcc) add(m stepTurn, f stepFloor) {
	calls, llmCalls := m.calls, time.Duration(a.res.LLMCalls)
	a.perStep = append(a.perStep, m.done.Sub(m.sent)/llmCalls)
	a.caughtUp = append(a.caughtUp, m.caught.Sub(m.sent)/llmCalls)
	a.floorStep = append(a.floorStep, (f.appends.sum()+f.kvPut)/llmCalls)
	a.kvPuts = append(a.kvPuts, f.kvPut)
	a.clientRun = append(a.clientRun, m.stored.Sub(m.sent))
	var prov time.Duration
	for _, c := range calls {
		prov += c.end.Sub(c.start) - c.inTAH
	}
	a.provider = append(a.provider, prov/time.Duration(len(calls)))
	a.appends = append(a.appends, f.appends...)
	a.applies = append(a.applies, f.applies...)
	a.addGaps(m, f)
	a.starts = append(a.starts, calls[0].start.Sub(m.sent))
	a.ends = append(a.ends, m.done.Sub(calls[len(calls)-1].end))
	a.addSteps(f)
	for _, e := range m.events() {
		body, _ := event.EncodeRecord([]event.Event{e}) // a record of one event
		a.bytes += len(body)
		a.nEvents++
		if e.Type == event.LLMStarted {
			a.res.LLMStartedBytesMin = min(a.res.LLMStartedBytesMin, len(body))
			a.res.LLMStartedBytesMax = max(a.res.LLMStartedBytesMax, len(body))
		}
	}
	a.res.CheckpointBytes = max(a.res.CheckpointBytes, f.checkpoint)
}

// addGaps counts, between two LLM calls in the middle of the turn, the
// events appended after call k began and before call k+1 began, against the
// time between the two.
func (a *stepAcc) addGaps(m stepTurn, f stepFloor) {
	calls := m.calls
	iv := intervals(m.events())
	for k := 1; k+1 < len(calls)-1; k++ {
		var fl time.Duration
		for _, i := range iv[k] {
			fl += f.appends[i]
		}
		gap := calls[k+1].start.Sub(calls[k].start)
		a.gaps = append(a.gaps, gap)
		a.gapFloors = append(a.gapFloors, fl)
		a.gapRatios = append(a.gapRatios, float64(gap)/float64(fl))
		own := gap - fl - (calls[k].end.Sub(calls[k].start) - calls[k].inTAH)
		switch {
		case k <= 20:
			a.early = append(a.early, own)
		case k >= len(calls)-22:
			a.late = append(a.late, own)
		}
	}
}

// addSteps counts the appends of each tool step (a group with an llm.started
// and a tool.started).
func (a *stepAcc) addSteps(f stepFloor) {
	i := 0
	for _, g := range f.groups {
		var s time.Duration
		for range g {
			s += f.appends[i]
			i++
		}
		has := func(t event.Type) bool {
			return slices.ContainsFunc(g, func(e event.Event) bool { return e.Type == t })
		}
		if !has(event.LLMStarted) || !has(event.ToolStarted) {
			continue
		}
		a.stepAppends = append(a.stepAppends, s)
		a.nSteps++
		a.stepEvents += len(g)
		if a.res.StepTypes == nil {
			for _, e := range g {
				a.res.StepTypes = append(a.res.StepTypes, string(e.Type))
			}
		}
	}
}

// result is the StepResult of the turns added.
func (a *stepAcc) result() *StepResult {
	res := a.res
	res.PerStep = medianDur(a.perStep)
	res.ProviderPerStep = medianDur(a.provider)
	res.CaughtUpPerStep = medianDur(a.caughtUp)
	res.FloorAppendPerStep = medianDur(a.floorStep)
	res.KVPut = medianDur(a.kvPuts)
	res.ClientRun = medianDur(a.clientRun)
	res.StepGapP50, res.StepGapFloorP50, res.StepGapRatioP50 = a.gaps.p50(), a.gapFloors.p50(), median(a.gapRatios)
	res.OwnEarly, res.OwnLate = a.early.p50(), a.late.p50()
	res.TurnStart, res.TurnEnd = a.starts.p50(), a.ends.p50()
	res.AppendP50, res.AppendRate = a.appends.p50(), perSec(len(a.appends), a.appends.sum())
	res.StepAppendsP50 = a.stepAppends.p50()
	res.ApplyP50, res.ApplyRate = a.applies.p50(), perSec(len(a.applies), a.applies.sum())
	if a.nSteps > 0 {
		res.EventsPerStep = float64(a.stepEvents) / float64(a.nSteps)
	}
	if a.nEvents > 0 {
		res.EventBytesMean = a.bytes / a.nEvents
	}
	res.Ratio = float64(res.PerStep) / float64(res.FloorAppendPerStep)
	res.RatioOwn = float64(res.PerStep-res.ProviderPerStep) / float64(res.FloorAppendPerStep)
	res.RatioFull = float64(res.PerStep) / float64(res.FloorAppendPerStep+res.ApplyP50)
	res.Overhead = res.PerStep - res.ProviderPerStep - res.FloorAppendPerStep
	return res
}
