package inspector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// keepAlive is the pause after which the live stream writes a comment, so
// that proxies keep an idle stream open.
const keepAlive = 15 * time.Second

// deltaBuffer is how many deltas wait for the stream while it reads the log
// (they are subscribed to first): a fuller channel drops them.
const deltaBuffer = 2048

// live streams a session's changes to its page as Server-Sent Events, from
// the log sequence the page was rendered at (?from=): "block" (a turn or
// notes rendered again, {"key","html"}), "head" (the session's header, its
// sequence, whether calls await approval, and which actions apply (cancel,
// steer, resume, compact):
// {"html","seq","awaiting","can"}) and "delta" (a token delta,
// {"step","text"}). The log is followed with an ordered consumer
// (client.Follow); deltas are core NATS messages, those of an older epoch
// dropped. It ends when the browser goes away.
func (h *Handler) live(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
	ctx := r.Context()
	// The deltas first, then the log: a step that starts after the read
	// has all its deltas here; one that streams during it is marked.
	deltas := make(chan *nats.Msg, deltaBuffer)
	sub, err := h.c.Conn().ChanSubscribe(wire.DeltaSubject(sid), deltas)
	if err != nil {
		http.Error(w, "deltas: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	lctx, cancel := context.WithTimeout(ctx, readTimeout)
	t, err := load(lctx, h.c, sid)
	if err == nil {
		t.markInFlight()
		t.providers = h.providers(lctx)
		t.tree = h.tree(lctx, &t.state)
	}
	cancel()
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	f, err := h.c.Follow(ctx, sid, t.state.LastSeq+1)
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	defer f.Close()
	h.streams.Add(1)
	defer h.streams.Add(-1)
	s := &stream{h: h, w: w, rc: http.NewResponseController(w), t: t, dirty: map[*block]bool{}}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	for _, b := range t.blocks {
		if b.Changed > from {
			s.dirty[b] = true
		}
	}
	if err := s.flush(ctx); err != nil {
		return
	}
	s.run(ctx, f.Events(), deltas)
}

// stream is one browser's live stream.
type stream struct {
	h     *Handler
	w     http.ResponseWriter
	rc    *http.ResponseController
	t     *timeline
	dirty map[*block]bool
	epoch uint64 // the highest delta epoch seen
	// treeStale: the log said a sub-agent started or ended since the tree
	// was read; the next flush reads it again.
	treeStale bool
}

// run forwards events and deltas until ctx ends, the follower stops or a
// write fails. Events are gathered while more are waiting, so that a burst
// renders each changed block once.
func (s *stream) run(ctx context.Context, events <-chan event.Event, deltas <-chan *nats.Msg) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			s.fold(ctx, e)
			s.drain(ctx, events)
			err = s.flush(ctx)
		case m := <-deltas:
			err = s.delta(m)
		case <-tick.C:
			_, err = fmt.Fprint(s.w, ": keep-alive\n\n")
			if err == nil {
				err = s.rc.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *stream) fold(ctx context.Context, e event.Event) {
	if b := s.t.add(e); b != nil {
		s.dirty[b] = true
	}
	if changesTree(s.t, e) {
		s.treeStale = true
	}
	if n := s.t.state.Node; e.Type == event.SessionClaimed && n != "" {
		if _, known := s.t.providers[n]; !known {
			s.t.providers = s.h.providers(ctx) // a node that started since
		}
	}
}

// drain folds the events already waiting.
func (s *stream) drain(ctx context.Context, events <-chan event.Event) {
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			s.fold(ctx, e)
		default:
			return
		}
	}
}

// flush sends the changed blocks, in page order, and the header (with the
// sub-agents read again when the log said one started or ended).
func (s *stream) flush(ctx context.Context) error {
	for _, b := range s.t.blocks {
		if !s.dirty[b] {
			continue
		}
		delete(s.dirty, b)
		html, err := s.h.fragment("block", s.t.view(b))
		if err != nil {
			return err
		}
		if err := s.send("block", map[string]string{"key": b.Key, "html": html}); err != nil {
			return err
		}
	}
	if s.treeStale {
		s.treeStale = false
		s.t.tree = s.h.tree(ctx, &s.t.state)
	}
	html, err := s.h.fragment("head", s.t.headView(s.t.state.ID))
	if err != nil {
		return err
	}
	st := &s.t.state
	return s.send("head", map[string]any{"html": html, "seq": st.LastSeq, "awaiting": st.AwaitingApproval,
		"can": map[string]bool{"cancel": canCancel(st), "steer": canSteer(st), "resume": canResume(st), "compact": canCompact(st)}})
}

// delta forwards a token delta, unless an older owner sent it.
func (s *stream) delta(m *nats.Msg) error {
	epoch, _ := strconv.ParseUint(m.Header.Get(wire.HeaderEpoch), 10, 64)
	if epoch < s.epoch {
		return nil
	}
	s.epoch = epoch
	var d wire.Delta
	if json.Unmarshal(m.Data, &d) != nil || d.Text == "" {
		return nil
	}
	return s.send("delta", map[string]string{"step": d.StepID, "text": d.Text})
}

func (s *stream) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return s.rc.Flush()
}
