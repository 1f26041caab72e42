package bench

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// fenceWatch is a log handler that notes when a node fences itself (its
// "out of touch with NATS" warning) and hands every record on.
type fenceWatch struct {
	next slog.Handler
	node string
	at   *foFences
}

// foFences are the self-fencings of the nodes in this process, and what
// their logs said of another node's death.
type foFences struct {
	mu      sync.Mutex
	log     []foFence
	signals []foSignal
	// timeouts are when a node's log said a read of a session's log or
	// checkpoint waited out its deadline (a direct get no server answered).
	timeouts []time.Time
}

// foSignal is a node's log line about another node's death: taken for dead
// on what the NATS servers saw (a disconnect advisory, the routes lost:
// why), left to its silence, or a change of the partitions it pulls (when
// it took the dead node's over, whatever the signal).
type foSignal struct {
	node  string // the node whose log said it
	about string // the node it is about (empty for a change of partitions)
	what  string
	at    time.Time
}

// The log lines of package node that foSignal notes (node/presence.go,
// node/cluster.go).
const (
	logDeclared       = "taking a node for dead without waiting for its silence"
	logToSilence      = "the node is left to its silence"
	logPartitions     = "partitions changed"
	logOutOfTouch     = "out of touch with NATS"
	logBackTouch      = "back in touch with NATS"
	logCheckpointRead = "checkpoint not readable"
	logNotLoaded      = "session not loaded yet"
	logAttrNode       = "node"
	logAttrWhy        = "why"
	logAttrAdded      = "added"
	signalSilence     = "silence (NodeTTL)"
	signalDeclared    = "the NATS servers: "
	signalDismissed   = "left to its silence: "
)

type foFence struct {
	node string
	at   time.Time
}

func (f *foFences) since(t0 time.Time) []FenceAt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FenceAt
	for _, x := range f.log {
		if !x.at.Before(t0) {
			out = append(out, FenceAt{Node: x.node, After: x.at.Sub(t0)})
		}
	}
	return out
}

// signalsSince returns what the logs said since t0, in order.
func (f *foFences) signalsSince(t0 time.Time) []foSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []foSignal
	for _, x := range f.signals {
		if !x.at.Before(t0) {
			out = append(out, x)
		}
	}
	return out
}

func (h fenceWatch) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h fenceWatch) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.HasPrefix(r.Message, logOutOfTouch) {
		h.at.mu.Lock()
		h.at.log = append(h.at.log, foFence{node: h.node, at: r.Time})
		h.at.mu.Unlock()
	}
	if sig, ok := h.signal(r); ok {
		h.at.mu.Lock()
		h.at.signals = append(h.at.signals, sig)
		h.at.mu.Unlock()
	}
	if readTimedOut(r) {
		h.at.mu.Lock()
		h.at.timeouts = append(h.at.timeouts, r.Time)
		h.at.mu.Unlock()
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h fenceWatch) WithAttrs(a []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(a)
	return h
}

func (h fenceWatch) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}

// readTimedOut reports whether record r is a session's load or checkpoint
// read that waited out its deadline.
func readTimedOut(r slog.Record) bool {
	if !strings.HasPrefix(r.Message, logCheckpointRead) && !strings.HasPrefix(r.Message, logNotLoaded) {
		return false
	}
	timedOut := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), "context deadline exceeded") {
			timedOut = true
		}
		return !timedOut
	})
	return timedOut
}

// timeoutsSince counts the reads that timed out since t0, by any node.
func (f *foFences) timeoutsSince(t0 time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, at := range f.timeouts {
		if !at.Before(t0) {
			n++
		}
	}
	return n
}

// signal is what record r says of another node's death, if anything.
func (h fenceWatch) signal(r slog.Record) (foSignal, bool) {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	sig := foSignal{node: h.node, about: attrs[logAttrNode], at: r.Time}
	switch {
	case strings.HasPrefix(r.Message, logDeclared):
		sig.what = signalDeclared + attrs[logAttrWhy]
	case strings.Contains(r.Message, logToSilence):
		sig.what = signalDismissed + r.Message
	case r.Message == logPartitions && attrs[logAttrAdded] != "" && attrs[logAttrAdded] != "[]":
		sig.about, sig.what = "", logPartitions+": added "+attrs[logAttrAdded]
	default:
		return foSignal{}, false
	}
	return sig, true
}
