package bus

import (
	"sync/atomic"
	"time"
)

// appendLatency is a moving average of how long this node's fenced appends
// take, from the call to the server's acknowledgement: what a session
// waits for each time it writes. The loop reads it to decide when a quick
// step is worth a write of its own (AppendLatency).
type appendLatency struct {
	ewma atomic.Int64 // nanoseconds; 0 before the first append
}

// appendLatencyShift makes the weight of a new sample, 1/8: the average
// follows a change of load within a few dozen appends and a lone slow one
// moves it little.
const appendLatencyShift = 3

// observe adds the time one append took.
func (l *appendLatency) observe(d time.Duration) {
	for {
		old := l.ewma.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)>>appendLatencyShift
		}
		if l.ewma.CompareAndSwap(old, next) {
			return
		}
	}
}

// AppendLatency is the moving average of how long this node's appends to
// the log take (0 before the first): about 1/8 of each new append's time
// goes into it. It rises with the load on the server and the disk (with
// fsync on every write, appends queue behind each other's fsyncs).
func (b *Bus) AppendLatency() time.Duration { return time.Duration(b.appendLatency.ewma.Load()) }
