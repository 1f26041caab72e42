package client

import (
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// asked is an input sent, whose answers a client reads: an outcome on its
// reply subject, or a refusal there or on the session's error subject.
type asked struct {
	sid, inputID string
	command      wire.Command
}

// reply reads a message on the input's reply subject. It reports final when
// the message settles the input: an outcome of the input that is not a
// handover (the node stopped, or another took the session over: the next
// owner answers again), or a refusal. err is the command's failure, if it
// failed.
func (a asked) reply(m *nats.Msg) (o wire.Outcome, final bool, err error) {
	o, ok := a.outcome(m, true)
	if !ok {
		return wire.Outcome{}, false, nil
	}
	switch o.FailureCode {
	case wire.FailureStopped, wire.FailureFenced:
		return wire.Outcome{}, false, nil
	}
	if o.Failure != "" || o.Refused() {
		return o, true, a.failed(o)
	}
	return o, true, nil
}

// refused reads a message on the session's error subject; it reports true,
// with the refusal and its error, when the refusal is of this input.
func (a asked) refused(m *nats.Msg) (wire.Outcome, bool, error) {
	o, ok := a.outcome(m, false)
	if !ok || !o.Refused() {
		return wire.Outcome{}, false, nil
	}
	return o, true, a.failed(o)
}

// outcome decodes an outcome of this input: its input id, in the body or
// (a refusal of a body that could not be read) the Tah-Input-Id header, is
// this input's; on the input's own reply subject (own), an outcome without
// one is too.
func (a asked) outcome(m *nats.Msg, own bool) (wire.Outcome, bool) {
	var o wire.Outcome
	if json.Unmarshal(m.Data, &o) != nil || o.Status == "" {
		return o, false
	}
	if o.InputID == "" {
		o.InputID = m.Header.Get(wire.HeaderInputID)
	}
	return o, o.InputID == a.inputID || own && o.InputID == ""
}

// failed is the error of an outcome that says the command was not carried
// out.
func (a asked) failed(o wire.Outcome) error {
	return &CommandError{Session: a.sid, InputID: a.inputID, Command: a.command, Code: o.FailureCode, Message: o.Failure, Outcome: o}
}
