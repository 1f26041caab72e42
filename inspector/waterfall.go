package inspector

import (
	"time"

	"github.com/tah-dev/tah/projection"
)

// bar is a step's place in the waterfall of its block (a turn): where it
// starts and how long it lasts, in thousandths of the block's span, drawn
// as an SVG rectangle (attributes: the page's Content-Security-Policy
// allows no inline style).
type bar struct {
	X, W int
	// Offset is the time from the block's start to the step's; Running is
	// set while the step has not ended (its bar reaches the page's time).
	Offset  time.Duration
	Running bool
}

// minBar is the narrowest bar drawn, in thousandths: a step of a
// millisecond in a turn of a minute stays visible.
const minBar = 4

// waterfall places items' steps on b's span: from its start (turn.started)
// to its end (the turn's end event), or to the last step's end or now
// while a step runs. A step without a start time (a log that predates
// them) gets no bar.
func waterfall(b *blockView, items []itemView, now time.Time) {
	start, end := b.StartedAt, b.EndedAt
	running := false
	for _, it := range items {
		st := it.Step
		if st == nil || st.StartedAt.IsZero() {
			continue
		}
		if start.IsZero() || st.StartedAt.Before(start) {
			start = st.StartedAt
		}
		if b.EndedAt.IsZero() {
			e := stepEnd(st, now)
			if e.After(end) {
				end = e
			}
			running = running || !st.Status.Done()
		}
	}
	if start.IsZero() {
		return
	}
	if b.EndedAt.IsZero() && running {
		end = now
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	b.Span = span
	for i := range items {
		st := items[i].Step
		if st == nil || st.StartedAt.IsZero() {
			continue
		}
		off, dur := st.StartedAt.Sub(start), stepEnd(st, now).Sub(st.StartedAt)
		x := clamp(int(off*1000/span), 0, 1000-minBar)
		items[i].Bar = bar{X: x, W: clamp(int(dur*1000/span), minBar, 1000-x), Offset: off, Running: !st.Status.Done()}
	}
}

// stepEnd is when a step ended, or now while it runs.
func stepEnd(st *projection.Step, now time.Time) time.Time {
	switch {
	case !st.EndedAt.IsZero():
		return st.EndedAt
	case st.Status.Done():
		return st.StartedAt.Add(time.Duration(st.DurationMS) * time.Millisecond)
	}
	return now
}

func clamp(v, lo, hi int) int {
	return max(lo, min(v, hi))
}
