package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Errors of this package.
var (
	// ErrUnknownType: an event whose type this version does not know. A reader
	// of the log (the read model, a client) skips such events after reporting
	// them; a session's owner stops there (projection.FoldLog: the session's
	// fault), since it cannot go on from a history it does not know.
	ErrUnknownType = errors.New("unknown event type")
	// ErrMalformed: an event or payload that is not valid JSON of its type.
	ErrMalformed = errors.New("malformed event")
	// ErrInvalidSessionID: a session id that is not a valid NATS subject token.
	ErrInvalidSessionID = errors.New("invalid session id")
	// ErrNewerSchema: a message body of a log schema version newer than
	// SchemaVersion, written by a newer TAH: upgrade the reader.
	ErrNewerSchema = errors.New("log schema newer than this build")
)

// Type names an event type, such as "turn.started".
type Type string

// Event is one entry of a session's log.
//
// In the log an event is one of the events of a record (see Record: the body
// of one message, which one append writes); Seq is the message's stream
// sequence and Index the event's position in its record, filled in when the
// event is read back. As JSON (the API's tah.api.events, and the whole body of
// a message in a log of schema version 1) it is this struct.
type Event struct {
	// Seq is the stream sequence of the event's record: with Index, the only
	// ordering of events. The events of one record share it. 0 until appended.
	Seq uint64 `json:"seq,omitempty"`
	// Index is the event's position in its record, from 0.
	Index int `json:"index,omitempty"`
	// Session is the id of the session the event belongs to.
	Session string `json:"session"`
	Type    Type   `json:"type"`
	// Time is when the writer created the event. Informative only.
	Time time.Time `json:"time"`
	// Epoch is the ownership epoch of the writer (see SessionClaimed). 0 for events
	// written before any claim, such as session.created.
	Epoch uint64 `json:"epoch,omitempty"`
	// Data is the type's payload, a JSON object.
	Data json.RawMessage `json:"data"`
}

// New builds an event of type t for session sid with payload data, which must be
// the payload type registered for t. Time is left zero for the writer to set.
func New(sid string, t Type, data any) (Event, error) {
	want, ok := payloads[t]
	if !ok {
		return Event{}, fmt.Errorf("event %q: %w", t, ErrUnknownType)
	}
	ptr := reflect.TypeOf(want())
	if got := reflect.TypeOf(data); got != ptr && got != ptr.Elem() {
		return Event{}, fmt.Errorf("event %q: payload is %v, want %v: %w", t, got, ptr.Elem(), ErrMalformed)
	}
	raw, err := marshalPayload(data)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w: %v", t, ErrMalformed, err)
	}
	return Event{Session: sid, Type: t, Data: raw}, nil
}

// MustNew is New for payloads known to be right, such as in tests and examples.
func MustNew(sid string, t Type, data any) Event {
	e, err := New(sid, t, data)
	if err != nil {
		panic(err)
	}
	return e
}

// Decode returns the typed payload of e: a pointer to the struct registered for
// its type (for example *TurnStartedData). An unknown type wraps ErrUnknownType;
// a payload that is not a JSON object of that type wraps ErrMalformed.
func (e Event) Decode() (any, error) {
	mk, ok := payloads[e.Type]
	if !ok {
		return nil, fmt.Errorf("event %d %q: %w", e.Seq, e.Type, ErrUnknownType)
	}
	p := mk()
	if len(e.Data) == 0 {
		return nil, fmt.Errorf("event %d %q: no payload: %w", e.Seq, e.Type, ErrMalformed)
	}
	if err := unmarshalPayload(e.Data, p); err != nil {
		return nil, fmt.Errorf("event %d %q: %w: %v", e.Seq, e.Type, ErrMalformed, err)
	}
	if v, ok := p.(validator); ok {
		if err := v.validate(); err != nil {
			return nil, fmt.Errorf("event %d %q: %w: %v", e.Seq, e.Type, ErrMalformed, err)
		}
	}
	return p, nil
}

// DecodeAs decodes e's payload into a T, checking that T is the payload of e's type.
func DecodeAs[T any](e Event) (T, error) {
	var zero T
	p, err := e.Decode()
	if err != nil {
		return zero, err
	}
	t, ok := p.(*T)
	if !ok {
		return zero, fmt.Errorf("event %d %q: payload is %T, not %T: %w", e.Seq, e.Type, p, zero, ErrMalformed)
	}
	return *t, nil
}

// validator is implemented by payloads with rules beyond their JSON shape.
type validator interface{ validate() error }
