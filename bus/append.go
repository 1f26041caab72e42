package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// SessionWriter appends to one session's log on behalf of one owner. Every
// append is one record (one message: the events of the call, atomically) on
// the session's subject of its shard, tah.evt.<k>.<sid>, and is fenced: it
// lands only if the subject's last sequence is still the one this writer last
// saw, so a writer that lost ownership gets ErrFenced instead of interleaving
// with the new owner.
//
// A SessionWriter keeps one append in flight at a time (R3 streams reject
// pipelined fenced appends); writers of different sessions run in parallel,
// and those of one shard share its fsyncs: appends that arrive while another
// is in flight on the shard go together as one atomic batch (batch.go), each
// record keeping its own fence and message id. It is safe for concurrent use;
// concurrent Appends are serialised.
type SessionWriter struct {
	b     *Bus
	sid   string
	epoch uint64
	// shard, stream and subject are the session's shard, its stream and the
	// session's subject in it.
	shard   int
	stream  string
	subject string
	// link is the connection of the shard's appends (Bus.appendLink): all
	// of the session's appends go on it, in order.
	link *link
	// idPrefix is "<sid>:<epoch>:<nonce>:"; the message id of a record is the
	// prefix and the sequence it expects to follow.
	idPrefix string

	mu     sync.Mutex
	last   uint64
	broken error // ErrFenced or ErrOutcomeUnknown, once it happened
	// written counts the bytes of the records this writer appended (their
	// bodies: a tenant's storage quota counts them).
	written atomic.Int64
}

// Written is the bytes of the records w appended (their bodies), the log's
// storage of them.
func (w *SessionWriter) Written() int64 { return w.written.Load() }

// Writer returns the writer of session sid for the owner at epoch, whose view
// of the log ends at lastSeq (0 for a session with no event yet; otherwise the
// lastSeq that Replay returned). It fails with ErrInvalidSessionID for a bad id.
func (b *Bus) Writer(sid string, epoch, lastSeq uint64) (*SessionWriter, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	k := b.ShardOf(sid)
	return &SessionWriter{
		b: b, sid: sid, epoch: epoch, last: lastSeq, shard: k, link: b.appendLink(k),
		stream: wire.EventShardStream(k), subject: wire.ShardSubject(k, sid),
		idPrefix: sid + ":" + strconv.FormatUint(epoch, 10) + ":" + event.NewID("") + ":",
	}, nil
}

// Session is the writer's session id.
func (w *SessionWriter) Session() string { return w.sid }

// Bus is the bus the writer appends through: its object store keeps what is
// too large for a record (PutArtifact), and MaxPayload says what is.
func (w *SessionWriter) Bus() *Bus { return w.b }

// Epoch is the writer's ownership epoch.
func (w *SessionWriter) Epoch() uint64 { return w.epoch }

// LastSeq is the sequence of the last record this writer knows in its session.
func (w *SessionWriter) LastSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Append appends events to the session's log as one record: one message,
// fenced on the sequence of the session's last record, that holds them all in
// order or none of them. It returns their stream sequence (the record's, the
// same for each) and fills in each event's Seq and Index, and its Session and
// Epoch when they are zero. The record's time is the first event's, or now
// when that is zero, and every event gets it. Since evs is the caller's slice
// when called as Append(ctx, evs...), the caller sees all of that.
//
// Errors: ErrFenced when another writer appended first (the writer stays
// fenced); ErrOutcomeUnknown when an acknowledgement was lost and ctx ended
// before the log could tell (the writer is then unusable); ErrInvalidEvent and
// ErrPayloadTooLarge for events that cannot be appended. On any error nothing
// of the call was appended, except with ErrOutcomeUnknown, when the record may
// have landed whole.
func (w *SessionWriter) Append(ctx context.Context, evs ...event.Event) ([]uint64, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return nil, w.broken
	}
	m, err := w.message(evs)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	seq, err := w.commit(ctx, m)
	if err == nil {
		w.b.appendLatency.observe(time.Since(begin))
	}
	if err != nil {
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrOutcomeUnknown) {
			w.broken = err
		}
		return nil, fmt.Errorf("append %s to session %s: %w", recordTypes(evs), w.sid, err)
	}
	w.last = seq
	w.written.Add(int64(len(m.Data)))
	w.b.noteAppended(w.shard, seq)
	seqs := make([]uint64, len(evs))
	for i := range evs {
		evs[i].Seq, evs[i].Index = seq, i
		seqs[i] = seq
	}
	return seqs, nil
}

// recordTypes names the types of a record's events, for errors.
func recordTypes(evs []event.Event) string {
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = string(e.Type)
	}
	return strings.Join(types, "+")
}

// message checks evs, completes their envelopes and builds their record's
// message, without the fencing headers.
func (w *SessionWriter) message(evs []event.Event) (*nats.Msg, error) {
	at := evs[0].Time
	if at.IsZero() {
		at = time.Now().UTC()
	}
	for i := range evs {
		if err := w.complete(&evs[i]); err != nil {
			return nil, err
		}
		evs[i].Time = at
	}
	body, err := event.EncodeRecord(evs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	m := nats.NewMsg(w.subject)
	m.Data = body
	// The fencing headers are set per attempt; size them now to refuse a
	// record that can never fit.
	w.setHeaders(m, ^uint64(0), w.positionID)
	if size, limit := natsx.MsgSize(m), w.b.MaxPayload(); size > limit {
		return nil, fmt.Errorf("record %s of session %s is %d bytes with its headers, over the server's max payload of %d bytes (put large outputs in the object store with PutArtifact and reference them): %w",
			recordTypes(evs), w.sid, size, limit, ErrPayloadTooLarge)
	}
	return m, nil
}

// complete checks ev and fills in its session and epoch.
func (w *SessionWriter) complete(ev *event.Event) error {
	switch {
	case ev.Session == "":
		ev.Session = w.sid
	case ev.Session != w.sid:
		return fmt.Errorf("event %s of session %q given to the writer of %q: %w", ev.Type, ev.Session, w.sid, ErrInvalidEvent)
	}
	switch {
	case ev.Epoch == 0:
		ev.Epoch = w.epoch
	case ev.Epoch != w.epoch:
		return fmt.Errorf("event %s has epoch %d, the writer %d: %w", ev.Type, ev.Epoch, w.epoch, ErrInvalidEvent)
	}
	if !event.Known(ev.Type) {
		return fmt.Errorf("event type %q: %w: %w", ev.Type, ErrInvalidEvent, event.ErrUnknownType)
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' {
		return fmt.Errorf("event %s: the payload is not a JSON object: %w", ev.Type, ErrInvalidEvent)
	}
	return nil
}

// positionID is the message id of an append expected to follow sequence
// last: the writer's prefix and last, unique to one writer and one position.
func (w *SessionWriter) positionID(last uint64) string {
	return w.idPrefix + strconv.FormatUint(last, 10)
}

// setHeaders sets the message id (idFor(last)) and fencing header for an
// append expected to follow sequence last.
func (w *SessionWriter) setHeaders(m *nats.Msg, last uint64, idFor func(uint64) string) {
	m.Header.Set(wire.HeaderMsgID, idFor(last))
	m.Header.Set(hdrExpectLastSubjSeq, strconv.FormatUint(last, 10))
}

// appendOne publishes m after w.last with the message id idFor(w.last),
// resolving lost acknowledgements by reading the log back, and returns the
// sequence it landed at. Every id idFor gives must start with w.idPrefix.
func (w *SessionWriter) appendOne(ctx context.Context, m *nats.Msg, idFor func(uint64) string) (uint64, error) {
	return w.appendAfter(ctx, m, idFor, false)
}

// appendAfter is appendOne after an earlier attempt of the same message (the
// same id, after the same w.last) whose outcome is unknown when sent is true:
// an atomic batch whose answer was lost. It then reads the log back before
// anything else, as after a lost acknowledgement, even when ctx has ended.
func (w *SessionWriter) appendAfter(ctx context.Context, m *nats.Msg, idFor func(uint64) string, sent bool) (uint64, error) {
	w.setHeaders(m, w.last, idFor)
	id := m.Header.Get(wire.HeaderMsgID)
	uncertain := sent // an attempt was sent and its outcome is not known
	readBack := sent  // read the log before publishing again
	backoff := 20 * time.Millisecond
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		return nil
	}
	unknown := func(err error) error { return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err) }
	for {
		if !readBack {
			if err := ctx.Err(); err != nil {
				if uncertain {
					return 0, unknown(err)
				}
				return 0, err
			}
			actx, cancel := context.WithTimeout(ctx, w.b.cfg.AppendTimeout)
			ack, err := w.b.publish(actx, w.link, m)
			cancel()
			if err == nil {
				// A duplicate ack (R3 answering a retry of a landed message) carries
				// the sequence of the original, which has our id.
				return ack.Sequence, nil
			}
			var apiErr *jetstream.APIError
			switch {
			case errors.As(err, &apiErr):
				switch {
				case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant && !uncertain:
					// A replicated stream's "wrong last sequence" without a
					// sequence (10164) is not a fence: its leader refuses a
					// fenced message while another of the subject is in
					// process (proposed, not applied yet), before comparing
					// any sequence. That other one may be this writer's own
					// previous append: nats-server acknowledges an append
					// before it clears the subject's in-process mark, so that
					// on a loaded server the next append of the session, sent
					// on that ack, can find the mark still there. Nothing of
					// this attempt was stored: once the other is applied, the
					// same attempt lands, or is refused with the sequence
					// (10071) of another writer's record, which fences it.
					if err := wait(); err != nil {
						return 0, err
					}
					continue
				case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant:
					if !uncertain {
						if seq, lastID, ok := w.ownLast(ctx); ok {
							if lastID == id {
								// An earlier attempt of this very message landed.
								return seq, nil
							}
							// The message after ours is ours again: a retry of our
							// previous append that the stream stored a second time
							// (possible around a leader change). No other writer is
							// involved; go on after it. Readers drop the duplicate.
							w.last = seq
							w.setHeaders(m, w.last, idFor)
							id = m.Header.Get(wire.HeaderMsgID)
							continue
						}
						return 0, fmt.Errorf("%w (expected last sequence %d: %v)", ErrFenced, w.last, apiErr)
					}
					// R1 answers a retry of a message that landed with "wrong last
					// sequence": the log says whether the last message is ours.
				case apiErr.ErrorCode == natsx.JSErrCodeDuplicateInProcess:
					// "Duplicate message id is in process" (10158): an earlier
					// attempt of this very message (a lost ack's) is proposed
					// and not applied yet. It may still land: the log tells,
					// as after a lost ack, and the next attempt gets its
					// acknowledgement.
				case apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
					return 0, fmt.Errorf("%w: %v", ErrPayloadTooLarge, apiErr)
				case apiErr.Code == 503:
					// JetStream answered that it cannot take the message now (a
					// leader election): nothing was stored by this attempt.
					if err := wait(); err != nil {
						if uncertain {
							return 0, unknown(err)
						}
						return 0, err
					}
					continue
				default:
					if uncertain {
						return 0, unknown(err)
					}
					return 0, err
				}
			case errors.Is(err, nats.ErrMaxPayload):
				return 0, fmt.Errorf("%w: %v", ErrPayloadTooLarge, err)
			case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrBadSubject):
				if uncertain {
					return 0, unknown(err)
				}
				return 0, err
			}
		}
		readBack = false
		// The ack was lost (timeout, no responders, a reconnect, the context
		// ended), or a retry was refused: the log tells whether it landed.
		uncertain = true
		seq, landed, err := w.resolve(ctx, id)
		switch {
		case err != nil:
			return 0, unknown(fmt.Errorf("reading the log back after a lost ack: %v", err))
		case landed:
			return seq, nil
		case seq != w.last:
			// Another writer's event follows ours: ours can never land.
			return 0, fmt.Errorf("%w (expected last sequence %d, the log has %d by another writer)", ErrFenced, w.last, seq)
		}
		if err := wait(); err != nil {
			// Ours may still be on its way: nothing can be concluded.
			return 0, unknown(err)
		}
	}
}

// ownLast reports whether the session's last message, after w.last, was
// written by this writer (its message id has the writer's prefix), with its
// sequence and message id.
func (w *SessionWriter) ownLast(ctx context.Context) (uint64, string, bool) {
	rctx, cancel := context.WithTimeout(ctx, w.b.cfg.AppendTimeout)
	defer cancel()
	msg, err := w.b.lastMsg(rctx, w.stream, w.subject)
	if err != nil || msg.seq <= w.last {
		return 0, "", false
	}
	id := msg.header.Get(wire.HeaderMsgID)
	return msg.seq, id, strings.HasPrefix(id, w.idPrefix)
}

// resolve reads the session's last message from the stream leader, retrying
// until ctx ends. landed reports whether it carries msgID; seq is its sequence
// (0 when the session has no event). When ctx has already ended it still makes
// one attempt, bounded by Config.AppendTimeout, so that an append whose
// caller gave up can at least learn that it landed.
func (w *SessionWriter) resolve(ctx context.Context, msgID string) (seq uint64, landed bool, err error) {
	for attempt := 0; ; attempt++ {
		base := ctx
		if ctx.Err() != nil {
			if attempt > 0 {
				return 0, false, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			base = context.WithoutCancel(ctx)
		}
		rctx, cancel := context.WithTimeout(base, w.b.cfg.AppendTimeout)
		var msg *storedMsg
		msg, err = w.b.lastMsg(rctx, w.stream, w.subject)
		cancel()
		switch {
		case err == nil:
			return msg.seq, msg.header.Get(wire.HeaderMsgID) == msgID, nil
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return 0, false, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
