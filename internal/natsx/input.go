package natsx

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// ErrPayloadTooLarge: a message larger than the server's max payload.
var ErrPayloadTooLarge = errors.New("payload too large")

// NewInputMsg builds the message of input in for session sid, sent by the
// credential named sender (wire.InputSubject): the JSON body
// on wire.InputSubject(sid, sender), with the id in the body (in.ID, generated when
// empty, which it returns), and the headers Tah-Command, Nats-Msg-Id
// (wire.InputMsgID: the session and the id, since TAH_IN de-duplicates
// across every session) and, when in.ReplyTo is set, Tah-Reply-To. It fails with event.ErrInvalidSessionID,
// wire.ErrMalformedInput (in does not validate) or ErrPayloadTooLarge (the
// message would be over maxPayload bytes).
func NewInputMsg(sid, sender string, in wire.Input, maxPayload int64) (*nats.Msg, string, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, "", err
	}
	if in.ID == "" {
		in.ID = event.NewID("in_")
	}
	if err := in.Validate(); err != nil {
		return nil, "", err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, "", fmt.Errorf("input: %w", err)
	}
	m := nats.NewMsg(wire.InputSubject(sid, sender))
	m.Data = body
	m.Header.Set(wire.HeaderCommand, string(in.Command))
	m.Header.Set(wire.HeaderMsgID, wire.InputMsgID(sid, in.ID))
	if in.ReplyTo != "" {
		m.Header.Set(wire.HeaderReplyTo, in.ReplyTo)
	}
	if size := MsgSize(m); int64(size) > maxPayload {
		return nil, "", fmt.Errorf("input %s for session %s is %d bytes, over the server's max payload of %d bytes: %w",
			in.ID, sid, size, maxPayload, ErrPayloadTooLarge)
	}
	return m, in.ID, nil
}

// MsgSize is the size of m on the wire as the server's max payload counts it:
// the header block and the body.
func MsgSize(m *nats.Msg) int {
	n := len(m.Data)
	if len(m.Header) > 0 {
		n += len("NATS/1.0\r\n") + len("\r\n")
		for k, vs := range m.Header {
			for _, v := range vs {
				n += len(k) + len(": ") + len(v) + len("\r\n")
			}
		}
	}
	return n
}
