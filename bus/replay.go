package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Replay reads session sid's records from sequence fromSeq on (0 or 1: from
// the start) and returns their events in log order (each with its record's
// Seq and its Index in it), with lastSeq, the sequence of the session's last
// record: the one to open a Writer with. lastSeq is that of the last record
// returned, or, when none is at or after fromSeq, that of the session's last
// record before it (0 for a session without events).
//
// It reads the session's shard with batched direct gets (next_by_subj on
// tah.evt.<k>.<sid>), which cost the same whatever the number of other
// sessions interleaved in the shard between fromSeq and the end; on a
// replicated stream it then confirms lastSeq with the stream leader, so that
// a lagging replica cannot hand out a stale lastSeq. A message whose body is
// not a record (nor a version-1 event) fails the replay with a
// *projection.Fault that names its sequence (and wraps event.ErrMalformed, or
// event.ErrNewerSchema for a record of a newer schema); the events before it
// come with that error, and lastSeq is then the sequence of the last record
// before it.
func (b *Bus) Replay(ctx context.Context, sid string, fromSeq uint64) ([]event.Event, uint64, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, 0, err
	}
	k := b.ShardOf(sid)
	evs, last, err := b.replayDirect(ctx, b.shards[k], wire.ShardSubject(k, sid), fromSeq)
	if err != nil {
		return evs, last, fmt.Errorf("replay session %s from %d: %w", sid, fromSeq, err)
	}
	return evs, last, nil
}

// replayBatch is how many messages one direct get request asks for (a
// variable for tests), and replayMaxBytes how many bytes.
var replayBatch = 1000

const replayMaxBytes = 8 << 20

// replayDirect reads the records of stream st on filter (one session) from
// fromSeq on: Replay's work, on a shard or, for the migration, the legacy log.
func (b *Bus) replayDirect(ctx context.Context, st jetstream.Stream, filter string, fromSeq uint64) ([]event.Event, uint64, error) {
	stream := st.CachedInfo().Config.Name
	fromSeq = max(fromSeq, 1)
	// From the message before fromSeq: when it is the session's record (a
	// resume after a checkpoint asks from the record after the one it
	// holds, a client from the one after the last it has), its id tells a
	// copy of it stored right after it (dropDuplicate); it is not returned.
	from := max(fromSeq-1, 1)
	var evs []event.Event
	var last uint64   // the sequence of the last message read (a dropped duplicate included)
	var prevID string // its message id
	readAll := func() error {
		for {
			var end uint64
			var more bool
			var err error
			evs, end, more, err = b.directBatch(ctx, stream, filter, from, fromSeq, evs, &prevID)
			if err != nil {
				return err
			}
			if end > 0 {
				last, from = end, end+1
			}
			if !more {
				return nil
			}
		}
	}
	if err := readAll(); err != nil {
		if errors.As(err, new(*projection.Fault)) {
			// What comes before it, for a fork.
			if len(evs) > 0 {
				last = evs[len(evs)-1].Seq
			}
			return evs, last, err
		}
		return nil, 0, err
	}
	if last != 0 && st.CachedInfo().Config.Replicas <= 1 {
		return evs, last, nil
	}
	// Ask the leader for the session's last sequence: nothing was found after
	// fromSeq, or a replica that answered the direct gets may lag.
	target := uint64(0)
	lm, err := b.lastMsg(ctx, stream, filter)
	switch {
	case err == nil:
		target = lm.seq
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, 0, fmt.Errorf("last sequence: %w", err)
	}
	if last == 0 && target < max(fromSeq, 1) {
		return evs, target, nil // no event at or after fromSeq
	}
	for last < target {
		before := last
		if err := readAll(); err != nil {
			return nil, 0, err
		}
		if last == before {
			// A replica behind the leader: it catches up within milliseconds.
			select {
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("replica behind the leader (%d < %d): %w", last, target, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return evs, last, nil
}

// directBatch asks stream for up to replayBatch messages on filter from
// sequence from on, appends the events of the records from keep on to evs,
// and returns the sequence of the last message read (0 for none) and
// whether more are pending. A message whose Nats-Msg-Id is the same as the
// one before it (*prevID) is a duplicate of it stored by the stream (see
// dropDuplicate) and is skipped; one before keep only sets *prevID.
func (b *Bus) directBatch(ctx context.Context, stream, filter string, from, keep uint64, evs []event.Event, prevID *string) ([]event.Event, uint64, bool, error) {
	req, _ := json.Marshal(struct {
		Seq      uint64 `json:"seq"`
		NextBy   string `json:"next_by_subj"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes"`
	}{from, filter, replayBatch, replayMaxBytes})
	r, first, err := b.directRequest(ctx, stream, req)
	if err != nil {
		return evs, 0, false, err
	}
	defer b.replies.close(r)
	rctx, cancel := context.WithTimeout(ctx, b.cfg.AppendTimeout)
	defer cancel()
	var end uint64
	for m := first; ; m = nil {
		if m == nil {
			if m, err = r.next(rctx); err != nil {
				return evs, end, false, fmt.Errorf("direct get: %w", err)
			}
		}
		if len(m.Data) == 0 {
			switch st := m.Header.Get("Status"); st {
			case "204": // end of batch
				np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return evs, end, np > 0, nil
			case "404": // nothing at or after from
				return evs, end, false, nil
			case "":
				// an empty body without a status: an empty message, invalid below
			default:
				return evs, end, false, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return evs, end, false, fmt.Errorf("direct get: no sequence in reply: %v", err)
		}
		end = seq
		if dropDuplicate(prevID, m.Header.Get(wire.HeaderMsgID)) || seq < keep {
			continue
		}
		rec, err := event.DecodeRecord(m.Data, seq)
		if err != nil {
			return evs, end, false, projection.RecordFault(seq, err)
		}
		evs = append(evs, rec...)
	}
}

// replayConsumer is Replay through an ephemeral, unacknowledged consumer
// filtered on the session (what an ordered consumer is on the server). It is
// kept for BenchmarkReplay, which measures it against replayDirect.
func (b *Bus) replayConsumer(ctx context.Context, sid string, fromSeq uint64) ([]event.Event, uint64, error) {
	k := b.ShardOf(sid)
	st, filter := b.shards[k], wire.ShardSubject(k, sid)
	c, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       max(fromSeq, 1),
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = st.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	pending := c.CachedInfo().NumPending
	evs := make([]event.Event, 0, pending)
	for read := uint64(0); read < pending; {
		batch, err := c.Fetch(int(min(pending-read, uint64(replayBatch))), jetstream.FetchMaxWait(b.cfg.AppendTimeout))
		if err != nil {
			return nil, 0, err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, err
			}
			rec, err := event.DecodeRecord(m.Data(), md.Sequence.Stream)
			if err != nil {
				return nil, 0, err
			}
			evs = append(evs, rec...)
			read++
		}
		if err := batch.Error(); err != nil {
			return nil, 0, err
		}
	}
	var last uint64
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	} else if lm, err := b.lastMsg(ctx, st.CachedInfo().Config.Name, filter); err == nil {
		last = lm.seq
	}
	return evs, last, nil
}

// dropDuplicate reports whether a message with id repeats the one before it
// in its session (*prev), and records id as the one before the next. Fenced
// appends make a second copy impossible in principle; a clustered stream can
// still store a retried append twice when a leader change overlaps the retry
// (the writer then carries on after both, see SessionWriter.Append). The copy
// has the same Nats-Msg-Id and body, so readers drop it here.
func dropDuplicate(prev *string, id string) bool {
	if id != "" && id == *prev {
		return true
	}
	*prev = id
	return false
}

// storedMsg is a message read back from a stream.
type storedMsg struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
}

// lastMsgTry bounds one request of lastMsg, and the wait for the first
// reply of one direct get (directRequest).
const lastMsgTry = 2 * time.Second

// directRequest sends a direct get of stream and waits for its first reply,
// in tries of lastMsgTry until ctx ends: a direct get is answered by any
// replica of the stream, and one whose server has stopped without closing
// its sockets (a host cut off) answers none until the routes to it are
// lost, so a get that waited the whole AppendTimeout for it held a load of
// a session that long (row 7's cut-off: loads waited out 5 s, then tried
// again). Each try has its own reply subject, so that a late answer to an
// earlier try is never read as this one's. It returns the reply queue
// (closed by the caller) and the first reply.
func (b *Bus) directRequest(ctx context.Context, stream string, req []byte) (*replyQueue, *nats.Msg, error) {
	for {
		r, err := b.replies.open()
		if err != nil {
			return nil, nil, err
		}
		if err := b.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, r.subject, req); err != nil {
			b.replies.close(r)
			return nil, nil, err
		}
		tctx, cancel := context.WithTimeout(ctx, lastMsgTry)
		m, err := r.next(tctx)
		cancel()
		if err == nil {
			return r, m, nil
		}
		b.replies.close(r)
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("direct get: %w", err)
		}
	}
}

// lastMsg returns the last message of stream on filter (a wildcard is
// allowed), asked of the stream leader (STREAM.MSG.GET, not a direct get that
// a lagging replica could answer). It wraps jetstream.ErrMsgNotFound when
// there is none.
func (b *Bus) lastMsg(ctx context.Context, stream, filter string) (*storedMsg, error) {
	req, _ := json.Marshal(struct {
		LastBy string `json:"last_by_subj"`
	}{filter})
	// One short try: a stream electing its leader (a server just died) does
	// not answer at all, and the caller's retry finds the new leader sooner
	// than a long wait would.
	rctx, cancel := context.WithTimeout(ctx, lastMsgTry)
	defer cancel()
	resp, err := b.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("stream msg get: %w", err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, errors.New("stream msg get: empty response")
	}
	m := &storedMsg{seq: r.Message.Seq, subject: r.Message.Subject, data: r.Message.Data}
	if len(r.Message.Header) > 0 {
		if m.header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("stream msg get: headers: %w", err)
		}
	}
	return m, nil
}

// LastSeq returns the sequence of session sid's last record (0 when it has
// none), asked of its shard's leader. A new owner claims a session that an old
// one may still be writing by appending its claim at LastSeq — retrying with a
// fresh LastSeq while that is fenced — and then replaying up to its claim:
// that takes one round trip per attempt, where replaying first could lose the
// race to a busy old owner again and again.
func (b *Bus) LastSeq(ctx context.Context, sid string) (uint64, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return 0, err
	}
	k := b.ShardOf(sid)
	m, err := b.lastMsg(ctx, wire.EventShardStream(k), wire.ShardSubject(k, sid))
	switch {
	case err == nil:
		return m.seq, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	}
	return 0, fmt.Errorf("last sequence of session %s: %w", sid, err)
}

// Heads returns, per shard k of the log, the sequence of its last record as
// its stream's leader has it (0 for a shard without records): asked of every
// shard at once. A read model that has applied each shard up to it holds
// every record appended before the call, wherever it was appended (the
// reads of a client after its own turn, on any node: Projector.Flush in
// node). The stream's last sequence is a record's: the log's records are
// never deleted. A shard that does not answer fails the call for its part
// only: its head is then 0 and the error says which.
func (b *Bus) Heads(ctx context.Context) ([]uint64, error) {
	heads := make([]uint64, len(b.shards))
	errs := make([]error, len(b.shards))
	var wg sync.WaitGroup
	for k := range b.shards {
		wg.Go(func() {
			heads[k], errs[k] = b.Head(ctx, k)
		})
	}
	wg.Wait()
	return heads, errors.Join(errs...)
}

// Head is Heads of shard k alone. A read of one session waits for it rather
// than for the session's last record (LastSeq), which the server sends
// whole: a record may weigh megabytes.
func (b *Bus) Head(ctx context.Context, k int) (uint64, error) {
	return b.lastSeqOf(ctx, wire.EventShardStream(k))
}

// lastSeqOf returns stream's last sequence, from its info (STREAM.INFO,
// answered by its leader; a cost that does not grow with its subjects, where
// a last message on a wildcard may), in one short try as lastMsg.
func (b *Bus) lastSeqOf(ctx context.Context, stream string) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, lastMsgTry)
	defer cancel()
	resp, err := b.nc.RequestWithContext(rctx, "$JS.API.STREAM.INFO."+stream, nil)
	if err != nil {
		return 0, fmt.Errorf("head of %s: %w", stream, err)
	}
	var r struct {
		Error *jetstream.APIError `json:"error"`
		State *struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, fmt.Errorf("head of %s: %w", stream, err)
	}
	if r.Error != nil {
		return 0, fmt.Errorf("head of %s: %w", stream, r.Error)
	}
	if r.State == nil {
		return 0, fmt.Errorf("head of %s: stream info without a state", stream)
	}
	return r.State.LastSeq, nil
}
