package event

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tah-dev/tah/internal/jsonx"
)

// SchemaVersion is the newest version of the log's message body that this
// build reads and writes. Version 2 is a Record of one or more events;
// version 3 is the same Record, which may hold event types that version 2
// does not have (tool.waiting); version 4 adds the approval events
// (tool.approval-requested, tool.approved, tool.denied); version 5 the
// budget's (budget.set, turn.reopened); version 6 turn.steered; version 7
// the fork's turn.forked and session.edited. A record is written with the lowest version
// that holds its events (recordVersion), so that a node of an older build
// reads every record it can and stops, as needing a newer node, only at one
// it cannot. Version 1, written before records existed, is one event
// envelope per message (an Event as JSON, with its "type"); DecodeRecord
// still reads it, as a record of one event.
const SchemaVersion = 7

// sinceVersion is the record version that introduced an event type; a type
// not listed is of version 2.
var sinceVersion = map[Type]int{ToolWaiting: 3, ToolApprovalRequested: 4, ToolApproved: 4, ToolDenied: 4, BudgetSet: 5, TurnReopened: 5, TurnSteered: 6,
	TurnForked: 7, SessionEdited: 7}

// recordVersion is the lowest record version that holds evs.
func recordVersion(evs []Event) int {
	v := 2
	for _, e := range evs {
		v = max(v, sinceVersion[e.Type])
	}
	return v
}

// Record is the body of one message of the log (schema version 2): the events
// of one session that one fenced append wrote together, atomically. They share
// the session, the writer's epoch and the time; Events keeps their order,
// which is their Index.
type Record struct {
	// V is the log schema version of the body: 2, or 3 to 7 when it
	// holds an event type of that version (see SchemaVersion).
	V int `json:"v" jsonschema:"enum=2,enum=3,enum=4,enum=5,enum=6,enum=7"`
	// Session is the id of the session the events belong to.
	Session string `json:"session"`
	// Epoch is the ownership epoch of the writer (see SessionClaimed); absent
	// (0) before the first claim, such as on session.created.
	Epoch uint64 `json:"epoch,omitempty"`
	// Time is when the writer appended the record. Informative only.
	Time time.Time `json:"time"`
	// Events are the record's events, in order: at least one.
	Events []RecordEvent `json:"events" jsonschema:"minItems=1"`
}

// RecordEvent is one event of a Record: its type and payload.
type RecordEvent struct {
	Type Type `json:"type"`
	// Data is the type's payload, a JSON object.
	Data json.RawMessage `json:"data"`
}

// EncodeRecord returns the body of the record that holds evs, in order. They
// must all be of one session and one epoch; the record's time is the first
// event's (readers give it to every event of the record). It wraps
// ErrMalformed when evs is empty or mixes sessions or epochs, or when a
// payload is not JSON.
//
// The body is the JSON of a Record, byte for byte what json.Marshal writes of
// it, built around the payloads: a payload that is already as Marshal writes
// it (jsonx.MarshalForm: every payload New made) is copied as it is, and only
// another (from outside, such as a payload with whitespace) goes through
// Marshal, which compacts it or refuses it. Marshal of the whole Record
// checked and copied every payload again through its encoder, about three
// times the work of this scan (BenchmarkStepEvents) for what New had
// already done.
func EncodeRecord(evs []Event) ([]byte, error) {
	if len(evs) == 0 {
		return nil, fmt.Errorf("a record of no event: %w", ErrMalformed)
	}
	first := evs[0]
	size := 96 + len(first.Session)
	for i, e := range evs {
		if e.Session != first.Session || e.Epoch != first.Epoch {
			return nil, fmt.Errorf("event %d of the record (%s, session %q epoch %d) is not of the record's session %q epoch %d: %w",
				i, e.Type, e.Session, e.Epoch, first.Session, first.Epoch, ErrMalformed)
		}
		size += 24 + len(e.Type) + len(e.Data)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(recordVersion(evs)), 10)
	b = append(b, `,"session":`...)
	b = jsonx.AppendString(b, first.Session)
	if first.Epoch != 0 {
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, first.Epoch, 10)
	}
	b = append(b, `,"time":`...)
	b, err := appendJSONTime(b, first.Time)
	if err != nil {
		return nil, fmt.Errorf("record of session %q: %w: %v", first.Session, ErrMalformed, err)
	}
	b = append(b, `,"events":[`...)
	for i, e := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendString(b, string(e.Type))
		b = append(b, `,"data":`...)
		if jsonx.MarshalForm(e.Data) {
			b = append(b, e.Data...)
		} else {
			data, err := json.Marshal(e.Data)
			if err != nil {
				return nil, fmt.Errorf("record of session %q: %w: %v", first.Session, ErrMalformed, err)
			}
			b = append(b, data...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendJSONTime appends t as json.Marshal writes it: RFC 3339 with its
// nanoseconds, "Z" for UTC, which the writers use; a time of another zone
// or year goes through Marshal (which refuses a year outside 0-9999).
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if _, off := t.Zone(); off == 0 && t.Year() >= 0 && t.Year() <= 9999 {
		b = append(b, '"')
		b = t.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	q, err := json.Marshal(t)
	return append(b, q...), err
}

// body is either version of a message body: a Record, or (version 1, V
// absent) one event envelope.
type body struct {
	V       int             `json:"v"`
	Session string          `json:"session"`
	Epoch   uint64          `json:"epoch"`
	Time    time.Time       `json:"time"`
	Events  []RecordEvent   `json:"events"`
	Type    Type            `json:"type"`
	Data    json.RawMessage `json:"data"`
}

// DecodeRecord parses the body of the message stored at sequence seq, a
// record (version 2 to 4) or a single event envelope (version 1), and returns its
// events in order, each with Seq set to seq and Index to its position. A body
// that is neither wraps ErrMalformed; one of a version above SchemaVersion
// wraps ErrNewerSchema.
func DecodeRecord(raw []byte, seq uint64) ([]Event, error) {
	var b body
	if !b.decodeJSON(raw) {
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("message at %d: %w: %v", seq, ErrMalformed, err)
		}
	}
	switch {
	case b.V == 0:
		if b.Type == "" {
			return nil, fmt.Errorf("message at %d: neither a record nor an event (no \"v\", no \"type\"): %w", seq, ErrMalformed)
		}
		return []Event{{Seq: seq, Session: b.Session, Type: b.Type, Time: b.Time, Epoch: b.Epoch, Data: b.Data}}, nil
	case b.V > SchemaVersion:
		return nil, fmt.Errorf("message at %d is of log schema version %d, this build reads up to %d: upgrade it: %w",
			seq, b.V, SchemaVersion, ErrNewerSchema)
	case b.V < 2:
		return nil, fmt.Errorf("message at %d: log schema version %d does not exist: %w", seq, b.V, ErrMalformed)
	case len(b.Events) == 0:
		return nil, fmt.Errorf("message at %d: a record of no event: %w", seq, ErrMalformed)
	}
	evs := make([]Event, len(b.Events))
	for i, re := range b.Events {
		if re.Type == "" {
			return nil, fmt.Errorf("message at %d: event %d has no type: %w", seq, i, ErrMalformed)
		}
		evs[i] = Event{Seq: seq, Index: i, Session: b.Session, Type: re.Type, Time: b.Time, Epoch: b.Epoch, Data: re.Data}
	}
	return evs, nil
}

// Before reports whether e comes before o in the log: an earlier record, or
// an earlier event of the same record.
func (e Event) Before(o Event) bool {
	return e.Seq < o.Seq || e.Seq == o.Seq && e.Index < o.Index
}
