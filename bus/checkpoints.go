package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// CheckpointKey is the key in tah_checkpoints of checkpoint id of session sid:
// "<sid>.<id token>" (wire.Token: the id itself when it is 1 to 128 letters,
// digits, '_' or '-', and otherwise "=" followed by the unpadded base64url of
// its bytes, the rule docs/protocol.md gives for every id in a subject or
// key; remote tool results use it too).
func CheckpointKey(sid, id string) string { return sid + "." + wire.Token(id) }

// ErrSegmentTooLarge: one message of a history is larger than a segment may
// be (MaxRecordSize): the checkpoint is not written, and a resume replays the
// log from the previous one.
var ErrSegmentTooLarge = errors.New("history segment too large")

// CheckpointStore is the bucket tah_checkpoints as the sessions use it, in
// their own types: a session's snapshot (its projection.State, whose window
// of the history is projection.Elided) under the session's id, and the
// segments of the history a window leaves out. A segment's key names where it
// starts in the elided part and how many messages it holds
// (CheckpointKey(sid, "h<from>-<n>")), so two writers of the same session (a
// fenced one finishing late) write the same bytes under a key.
type CheckpointStore struct {
	kv jetstream.KeyValue
	// limit is the largest segment, in bytes (the Bus's MaxRecordSize).
	limit func() int
}

// CheckpointStore is the Bus's checkpoint bucket in the sessions' types; nil
// when the Bus has none.
func (b *Bus) CheckpointStore() *CheckpointStore {
	if b.checkpoints == nil {
		return nil
	}
	return &CheckpointStore{kv: b.checkpoints, limit: b.MaxRecordSize}
}

// Bucket is the bucket's name, for a checkpoint.created.
func (c *CheckpointStore) Bucket() string { return c.kv.Bucket() }

// Snapshot is the snapshot of session sid. ok is false when there is none,
// or what is stored is not sid's state (it does not decode, or it names
// another session): the session is replayed from the start of its log. An
// error says the bucket could not be read.
func (c *CheckpointStore) Snapshot(ctx context.Context, sid string) (st projection.State, ok bool, err error) {
	e, err := c.get(ctx, sid)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return projection.State{}, false, nil
	}
	if err != nil {
		return projection.State{}, false, err
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil || st.ID != sid {
		return projection.State{}, false, nil
	}
	return st, true, nil
}

// get reads key in tries of lastMsgTry until ctx ends: the bucket's
// reads are direct gets, answered by any replica, and one whose server has
// stopped without closing its sockets answers none until the routes to it
// are lost (row 7's cut-off: a load's read of its checkpoint waited out its
// whole 15 s attempt).
func (c *CheckpointStore) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, lastMsgTry)
		e, err := c.kv.Get(tctx, key)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return e, err
		}
	}
}

// PutSnapshot stores st as the snapshot of session sid, replacing the
// previous one.
func (c *CheckpointStore) PutSnapshot(ctx context.Context, sid string, st *projection.State) error {
	snap, err := json.Marshal(st)
	if err != nil {
		return err
	}
	_, err = c.kv.Put(ctx, sid, snap)
	return err
}

// segmentKey is the key of the segment of session sid that holds n messages
// from the from-th elided one.
func segmentKey(sid string, from, n int) string {
	return CheckpointKey(sid, "h"+strconv.Itoa(from)+"-"+strconv.Itoa(n))
}

// PutHistory stores msgs, the messages of session sid's history from the
// from-th one a window leaves out, in segments no larger than a record each,
// and returns how many messages each segment holds, in order (what
// projection.Elided.Segments records). It fails with ErrSegmentTooLarge when
// one message is larger than that.
func (c *CheckpointStore) PutHistory(ctx context.Context, sid string, from int, msgs []llm.Message) ([]int, error) {
	limit := c.limit()
	var sizes []int
	for len(msgs) > 0 {
		body, k, err := segment(msgs, limit)
		if err != nil {
			return sizes, err
		}
		if _, err := c.kv.Put(ctx, segmentKey(sid, from, k), body); err != nil {
			return sizes, fmt.Errorf("store %d messages of the history: %w", k, err)
		}
		sizes = append(sizes, k)
		from += k
		msgs = msgs[k:]
	}
	return sizes, nil
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
			return nil, 0, fmt.Errorf("a message of %d bytes is over the %d bytes of a segment: %w", len(body), limit, ErrSegmentTooLarge)
		}
		n = max(1, n*limit/len(body)) // about what fits; try again
	}
}

// History reads back the messages e says session sid's window left out,
// from their segments. A segment that does not hold what e says fails with
// projection.ErrInconsistent.
func (c *CheckpointStore) History(ctx context.Context, sid string, e projection.Elided) ([]llm.Message, error) {
	msgs := make([]llm.Message, 0, e.Messages)
	from := 0
	for _, k := range e.Segments {
		entry, err := c.get(ctx, segmentKey(sid, from, k))
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
