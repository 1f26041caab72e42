package bench

import (
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
)

// stepAcc gathers row 2's measured turns and their floors into a
// StepResult.
type stepAcc struct {
	res                                            *StepResult
	perStep, provider, caughtUp, floorStep, kvPuts []time.Duration
	clientRun, cpu, stepRecCPU                     []time.Duration
	gaps, gapFloors, early, late, starts, ends     sample
	gapRatios, allocs, allocBytes                  []float64
	stepRecs, oneEvent, applies, stepAppends       sample
	eventBytes, nEvents, stepBytes                 int
	nSteps, stepEvents, stepRecords                int

	// Tracing's rounds: [0] the turns with tracing off, [1] on.
	tracedPerStep, tracedCPU [2][]time.Duration
	tracedAllocs             [2][]float64
	tracedBytes              []float64
}

func newStepAcc(c Config, sync time.Duration) *stepAcc {
	return &stepAcc{res: &StepResult{Durability: durabilityName(sync), Sync: sync, ToolSteps: c.Steps, LLMCalls: c.Steps + 1, Turns: c.StepTurns,
		LLMStartedBytesMin: 1 << 30}}
}

// add counts turn m and its floor f.
func (a *stepAcc) add(m stepTurn, f stepFloor) {
	calls, llmCalls := m.calls, time.Duration(a.res.LLMCalls)
	a.perStep = append(a.perStep, m.done.Sub(m.sent)/llmCalls)
	a.caughtUp = append(a.caughtUp, m.caught.Sub(m.sent)/llmCalls)
	a.cpu = append(a.cpu, m.cpu/llmCalls)
	a.allocs = append(a.allocs, float64(m.allocs.objects)/float64(llmCalls))
	a.allocBytes = append(a.allocBytes, float64(m.allocs.bytes)/float64(llmCalls))
	a.floorStep = append(a.floorStep, (f.appends.sum()+f.kvPut)/llmCalls)
	a.kvPuts = append(a.kvPuts, f.kvPut)
	a.clientRun = append(a.clientRun, m.stored.Sub(m.sent))
	var prov time.Duration
	for _, c := range calls {
		prov += c.end.Sub(c.start) - c.inTAH
	}
	a.provider = append(a.provider, prov/time.Duration(len(calls)))
	a.stepRecs = append(a.stepRecs, f.stepRecs...)
	if f.stepRecsCPU > 0 {
		a.stepRecCPU = append(a.stepRecCPU, f.stepRecsCPU)
	}
	a.oneEvent = append(a.oneEvent, f.oneEvent...)
	a.applies = append(a.applies, f.applies...)
	a.addGaps(m, f)
	a.starts = append(a.starts, calls[0].start.Sub(m.sent))
	a.ends = append(a.ends, m.done.Sub(calls[len(calls)-1].end))
	a.addSteps(f)
	for _, e := range m.events() {
		n := recordBytes([]event.Event{e})
		if e.Type == event.LLMStarted {
			a.res.LLMStartedBytesMin = min(a.res.LLMStartedBytesMin, n)
			a.res.LLMStartedBytesMax = max(a.res.LLMStartedBytesMax, n)
		}
	}
	a.res.CheckpointBytes = max(a.res.CheckpointBytes, f.checkpoint)
}

// addTraced counts turn m of tracing's rounds, run with tracing on or
// off; with it on, the exporter sent otlpBytes of its spans.
func (a *stepAcc) addTraced(m stepTurn, on bool, otlpBytes int64) {
	llmCalls := time.Duration(a.res.LLMCalls)
	i := 0
	if on {
		i = 1
		a.tracedBytes = append(a.tracedBytes, float64(otlpBytes)/float64(llmCalls))
	}
	a.tracedPerStep[i] = append(a.tracedPerStep[i], m.done.Sub(m.sent)/llmCalls)
	a.tracedCPU[i] = append(a.tracedCPU[i], m.cpu/llmCalls)
	a.tracedAllocs[i] = append(a.tracedAllocs[i], float64(m.allocs.objects)/float64(llmCalls))
}

// addGaps counts, between two LLM calls in the middle of the turn, the
// records appended after call k began and before call k+1 began, against the
// time between the two.
func (a *stepAcc) addGaps(m stepTurn, f stepFloor) {
	calls := m.calls
	iv := intervals(f.recs)
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

// addSteps counts what each full tool step wrote: its records appended
// again as written, its events and their sizes.
func (a *stepAcc) addSteps(f stepFloor) {
	for _, g := range f.steps {
		a.stepAppends = append(a.stepAppends, f.appends[g.from:g.to].sum())
		evs := flatten(f.recs[g.from:g.to])
		a.nSteps++
		a.stepEvents += len(evs)
		a.stepRecords += g.to - g.from
		a.stepBytes += recordBytes(evs)
		for _, e := range evs {
			a.eventBytes += recordBytes([]event.Event{e})
			a.nEvents++
		}
		if a.res.StepRecords == nil {
			for _, r := range f.recs[g.from:g.to] {
				a.res.StepRecords = append(a.res.StepRecords, strings.ReplaceAll(recordName(r), "+", " + "))
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
	// The CPU and the allocations are the turns' mean, not their median:
	// a garbage collection's cycle costs a few milliseconds of CPU and
	// lands on one turn in two or three (a turn of 200 steps allocates
	// about 9 MB), so that the turns of one run took 100 to 300 µs a step,
	// and a median left out most of the collector's work.
	res.CPUPerStep = meanDur(a.cpu)
	res.AllocsPerStep, res.AllocBytesPerStep = mean(a.allocs), mean(a.allocBytes)
	res.FloorAppendPerStep = medianDur(a.floorStep)
	res.KVPut = medianDur(a.kvPuts)
	res.ClientRun = medianDur(a.clientRun)
	res.StepGapP50, res.StepGapFloorP50, res.StepGapRatioP50 = a.gaps.p50(), a.gapFloors.p50(), median(a.gapRatios)
	res.OwnEarly, res.OwnLate = a.early.p50(), a.late.p50()
	res.TurnStart, res.TurnEnd = a.starts.p50(), a.ends.p50()
	res.StepRecordP50, res.StepRecordRate = a.stepRecs.p50(), perSec(len(a.stepRecs), a.stepRecs.sum())
	if len(a.stepRecCPU) > 0 {
		res.StepRecordCPU = medianDur(a.stepRecCPU)
		res.CPURatio = float64(res.CPUPerStep) / float64(max(res.StepRecordCPU, 1))
	}
	res.OneEventP50, res.OneEventRate = a.oneEvent.p50(), perSec(len(a.oneEvent), a.oneEvent.sum())
	res.StepAppendsP50 = a.stepAppends.p50()
	res.ApplyP50, res.ApplyRate = a.applies.p50(), perSec(len(a.applies), a.applies.sum())
	if a.nSteps > 0 {
		res.EventsPerStep = float64(a.stepEvents) / float64(a.nSteps)
		res.RecordsPerStep = float64(a.stepRecords) / float64(a.nSteps)
		res.StepRecordBytesMean = a.stepBytes / a.nSteps
	}
	if a.nEvents > 0 {
		res.EventBytesMean = a.eventBytes / a.nEvents
	}
	res.Ratio = float64(res.PerStep) / float64(max(res.StepRecordP50, 1))
	res.RatioWritten = float64(res.PerStep) / float64(max(res.FloorAppendPerStep, 1))
	res.Overhead = res.PerStep - res.ProviderPerStep - res.FloorAppendPerStep
	if n := len(a.tracedCPU[1]); n > 0 && len(a.tracedCPU[0]) > 0 {
		res.TracedTurns = n
		res.UntracedPerStep, res.UntracedCPUPerStep = medianDur(a.tracedPerStep[0]), medianDur(a.tracedCPU[0])
		res.TracedPerStep, res.TracedCPUPerStep = medianDur(a.tracedPerStep[1]), medianDur(a.tracedCPU[1])
		res.TracedCPURatio = float64(res.TracedCPUPerStep) / float64(max(res.UntracedCPUPerStep, 1))
		res.UntracedAllocsPerStep, res.TracedAllocsPerStep = median(a.tracedAllocs[0]), median(a.tracedAllocs[1])
		res.TracedOTLPBytesPerStep = median(a.tracedBytes)
	}
	return res
}
