package bench

import (
	"math"
	"slices"
	"time"
)

// sample is a set of measured durations.
type sample []time.Duration

// pct returns the p-th percentile (0..100) by nearest rank; 0 when empty.
func (s sample) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

func (s sample) p50() time.Duration { return s.pct(50) }
func (s sample) p99() time.Duration { return s.pct(99) }

func (s sample) sum() time.Duration {
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t
}

// perSec is the rate of n operations done in d.
func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// median of floats; 0 when empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// mean is the mean of v, 0 for none.
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func meanDur(v []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range v {
		sum += d
	}
	return sum / time.Duration(max(len(v), 1))
}

func medianDur(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(median(f))
}
