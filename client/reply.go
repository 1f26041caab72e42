package client

import (
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// asked is an input sent, whose answers a client reads: an outcome on its
// reply subject, or an input error there or on the session's error subject.
type asked struct {
	sid, inputID string
	command      wire.Command
}

// reply reads a message on the input's reply subject. It reports final when
// the message settles the input: an outcome of the input that is not a
// handover (the node stopped, or another took the session over: the next
// owner answers again), or an input error. err is the command's failure, if
// it failed.
func (a asked) reply(m *nats.Msg) (o wire.Outcome, final bool, err error) {
	var probe struct {
		Status *string `json:"status"`
	}
	if json.Unmarshal(m.Data, &probe) != nil {
		return o, false, nil // not for us
	}
	if m.Header.Get(wire.HeaderInputID) != "" || probe.Status == nil {
		// An InputError, which the node also sends to the reply subject.
		mine, err := a.refused(m)
		return o, mine, err
	}
	if json.Unmarshal(m.Data, &o) != nil || (o.InputID != "" && o.InputID != a.inputID) {
		return wire.Outcome{}, false, nil
	}
	switch o.FailureCode {
	case wire.FailureStopped, wire.FailureFenced:
		return wire.Outcome{}, false, nil
	}
	if o.Failure != "" {
		return o, true, &CommandError{Session: a.sid, InputID: a.inputID, Command: a.command, Code: o.FailureCode, Message: o.Failure}
	}
	return o, true, nil
}

// refused reads an InputError; it reports true, with the error, when the
// error is about this input.
func (a asked) refused(m *nats.Msg) (bool, error) {
	var ie wire.InputError
	if json.Unmarshal(m.Data, &ie) != nil || ie.Code == "" {
		return false, nil
	}
	if ie.InputID == "" {
		ie.InputID = m.Header.Get(wire.HeaderInputID)
	}
	if ie.InputID != a.inputID {
		return false, nil
	}
	return true, &CommandError{Session: a.sid, InputID: a.inputID, Command: a.command, Code: ie.Code, Message: ie.Error, Input: &ie}
}
