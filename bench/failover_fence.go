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

// foFences are the self-fencings of the nodes in this process.
type foFences struct {
	mu  sync.Mutex
	log []foFence
}

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

func (h fenceWatch) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h fenceWatch) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.HasPrefix(r.Message, "out of touch with NATS") {
		h.at.mu.Lock()
		h.at.log = append(h.at.log, foFence{node: h.node, at: r.Time})
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
