package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// A checkpoint is the session's state with a window of its history
// (projection.Elided): the turns no request can send any more are stored
// once, in segments of the checkpoint bucket, and the snapshot holds the
// turns after them, the current turn's steps and the counters. Its size and
// the time to decode it do not grow with the history, and neither does the
// actor's memory. A segment's key names where it starts in the elided part
// and how many messages it holds (segmentKey), so two writers of the same
// session (a fenced one finishing late) write the same bytes under a key.
// Segments are read back only when a compaction, or a request the window
// cannot make (a larger budget), needs the whole history.

// segmentKey is the key of the segment of session sid that holds n messages
// from the from-th elided one.
func segmentKey(sid string, from, n int) string {
	return bus.CheckpointKey(sid, "h"+strconv.Itoa(from)+"-"+strconv.Itoa(n))
}

// elide leaves out of a's state the turns ElisionCut allows, after storing
// them in kv as segments no larger than limit bytes each.
func elide(ctx context.Context, kv jetstream.KeyValue, a *AgentContext, limit int) error {
	st := a.state
	at, n := st.ElisionCut(st.Config.ContextChars)
	if n == 0 {
		return nil
	}
	from := st.Elided.Messages
	var sizes []int
	for msgs := st.Messages[at : at+n]; len(msgs) > 0; {
		body, k, err := segment(msgs, limit)
		if err != nil {
			return err
		}
		if _, err := kv.Put(ctx, segmentKey(a.Session, from, k), body); err != nil {
			return fmt.Errorf("store %d messages of the history: %w", k, err)
		}
		sizes = append(sizes, k)
		from += k
		msgs = msgs[k:]
	}
	if _, err := st.Elide(at, n); err != nil {
		return err
	}
	st.Elided.Segments = append(st.Elided.Segments, sizes...)
	return nil
}

// segment is the JSON of the longest prefix of msgs, one message at least,
// whose JSON is at most limit bytes, and its length.
func segment(msgs []llm.Message, limit int) ([]byte, int, error) {
	n := len(msgs)
	for {
		body, err := json.Marshal(msgs[:n])
		if err != nil {
			return nil, 0, err
		}
		switch {
		case len(body) <= limit:
			return body, n, nil
		case n == 1:
			return nil, 0, fmt.Errorf("a message of %d bytes is over the %d bytes of a segment: %w", len(body), limit, errSegmentTooLarge)
		}
		n = max(1, n*limit/len(body)) // about what fits; try again
	}
}

// errSegmentTooLarge: one message does not fit in a segment; the checkpoint
// is not written and a resume replays the log from the previous one.
var errSegmentTooLarge = errors.New("history segment too large")

// wholeHistory gives a's state back the messages its window left out, read
// from their segments. A compaction needs them, and a request the window
// cannot make.
func (a *AgentContext) wholeHistory(ctx context.Context) error {
	if a.state.Elided.Messages == 0 {
		return nil
	}
	msgs, err := readHistory(ctx, a.segments, a.Session, a.state.Elided)
	if err != nil {
		return err
	}
	return a.state.Restore(msgs)
}

// readHistory reads the messages e says session sid's window left out, from
// their segments in kv.
func readHistory(ctx context.Context, kv jetstream.KeyValue, sid string, e projection.Elided) ([]llm.Message, error) {
	if kv == nil {
		return nil, fmt.Errorf("session %s: %d messages of its history are in segments and no checkpoint bucket is open", sid, e.Messages)
	}
	msgs := make([]llm.Message, 0, e.Messages)
	from := 0
	for _, k := range e.Segments {
		entry, err := kv.Get(ctx, segmentKey(sid, from, k))
		if err != nil {
			return nil, fmt.Errorf("read %d messages of the history from %d: %w", k, from, err)
		}
		var part []llm.Message
		if err := json.Unmarshal(entry.Value(), &part); err != nil || len(part) != k {
			return nil, fmt.Errorf("history segment %s holds not %d messages (%v): %w", entry.Key(), k, err, projection.ErrInconsistent)
		}
		msgs = append(msgs, part...)
		from += k
	}
	return msgs, nil
}

// compactionView is projection.CompactionView of a's state, the whole
// history read back first when the window does not hold what the
// compaction covers.
func (a *AgentContext) compactionView(ctx context.Context) ([]llm.Message, int, error) {
	if msgs, offset, ok := a.state.CompactionView(); ok {
		return msgs, offset, nil
	}
	if err := a.wholeHistory(ctx); err != nil {
		return nil, 0, err
	}
	return a.state.Messages, 0, nil
}

// nextRequest is projection.NextRequest of a's state, the whole history
// read back first when the window cannot make it.
func (a *AgentContext) nextRequest(ctx context.Context, tools []llm.ToolSchema) (projection.StepRequest, error) {
	next, err := projection.NextRequest(a.state, tools, &a.hasher)
	if !errors.Is(err, projection.ErrHistoryNeeded) {
		return next, err
	}
	if err := a.wholeHistory(ctx); err != nil {
		return next, err
	}
	return projection.NextRequest(a.state, tools, &a.hasher)
}

// needsWholeHistory reports whether folding evs into a state with a window
// needs the history it left out: a summary goes where the history says.
func needsWholeHistory(st *projection.State, evs []event.Event) bool {
	if st.Elided.Messages == 0 {
		return false
	}
	for _, e := range evs {
		if e.Type == event.SummaryAdded {
			return true
		}
	}
	return false
}
