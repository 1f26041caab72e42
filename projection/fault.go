package projection

import (
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
)

// The codes of a Fault.
const (
	// FaultCorruptLog: a record that is not one (malformed JSON, an unknown
	// type, a payload of the wrong shape), an event that contradicts the
	// history, or one that no owner wrote (see ApplyLog). The session is
	// StatusFailed until it is repaired.
	FaultCorruptLog = "corrupt_log"
	// FaultNeedsNewerNode: a record of a log schema version above
	// event.SchemaVersion, written by a newer TAH during a rolling upgrade.
	// Not corruption: the session is StatusNeedsNewerNode on this node, and
	// a node that knows the version runs it.
	FaultNeedsNewerNode = "needs_newer_node"
)

// Errors of ApplyLog, besides those of Apply.
var (
	// ErrNotOwner: an event written by no owner of the session: not carrying
	// the epoch of the session's last claim (0 before the first), or, for
	// session.created and session.forked, written after a claim.
	ErrNotOwner = errors.New("event written by no owner of the session")
	// ErrFaulted: an event of a session whose log is faulted already (State.Fault):
	// nothing after the fault is folded.
	ErrFaulted = errors.New("session log faulted earlier")
)

// Fault is the first place of a session's log that a node cannot fold: a
// session with a Fault takes no more events and runs no more turns here. It
// is part of the State, so that the read model shows it.
type Fault struct {
	// Code is FaultCorruptLog or FaultNeedsNewerNode.
	Code string `json:"code"`
	// Seq is the stream sequence of the offending record, Index the event's
	// position in it (0 for a record that could not be read at all) and Type
	// its type when known.
	Seq    uint64     `json:"seq"`
	Index  int        `json:"index,omitempty"`
	Type   event.Type `json:"type,omitempty"`
	Reason string     `json:"reason"`
	// cause is the error Reason describes, while the Fault is not read back
	// from JSON.
	cause error
}

func (f *Fault) Error() string {
	return fmt.Sprintf("session log %s at %d.%d: %s", f.Code, f.Seq, f.Index, f.Reason)
}

// Unwrap is the error the fault was made of (nil once read back from JSON).
func (f *Fault) Unwrap() error { return f.cause }

// Status is the session status a fault gives: StatusNeedsNewerNode or
// StatusFailed.
func (f *Fault) Status() Status {
	if f.Code == FaultNeedsNewerNode {
		return StatusNeedsNewerNode
	}
	return StatusFailed
}

// RecordFault is the fault of a message at seq of the log whose body
// event.DecodeRecord refused with err: FaultNeedsNewerNode for a newer log
// schema (event.ErrNewerSchema), FaultCorruptLog otherwise.
func RecordFault(seq uint64, err error) *Fault {
	code := FaultCorruptLog
	if errors.Is(err, event.ErrNewerSchema) {
		code = FaultNeedsNewerNode
	}
	return &Fault{Code: code, Seq: seq, Reason: err.Error(), cause: err}
}

// SetFault records f as the session's fault, unless it has one already (the
// first one counts). The session's status is then f's (Fault.Status), while
// Status keeps what was folded.
func (s *State) SetFault(f *Fault) {
	if s.Fault == nil {
		s.Fault = f
	}
}

// ApplyLog is Apply for a session's log as its owner reads it back: strict.
// An event Apply refuses, or that no owner wrote (ErrNotOwner), is not
// skipped: it faults the session (SetFault, FaultCorruptLog), and nothing
// after it is folded (ErrFaulted). The error is the *Fault, which wraps the
// cause.
func ApplyLog(s *State, e event.Event) error {
	if s.Fault != nil {
		return fmt.Errorf("event %d.%d %q: %w: %w", e.Seq, e.Index, e.Type, ErrFaulted, s.Fault)
	}
	err := CheckOwner(s, e)
	if err == nil {
		err = Apply(s, e)
	}
	if err != nil {
		s.SetFault(EventFault(e, err))
		return s.Fault
	}
	return nil
}

// EventFault is the fault of event e, which ApplyLog refused with err.
func EventFault(e event.Event, err error) *Fault {
	return &Fault{Code: FaultCorruptLog, Seq: e.Seq, Index: e.Index, Type: e.Type, Reason: err.Error(), cause: err}
}

// FoldLog folds events into s with ApplyLog and returns s.Fault: nil when
// every event was folded.
func FoldLog(s *State, events []event.Event) *Fault {
	for _, e := range events {
		if ApplyLog(s, e) != nil {
			break
		}
	}
	return s.Fault
}

// CheckOwner reports, wrapping ErrNotOwner, an event that no owner of the
// session wrote: session.created and session.forked (and a fork's
// turn.forked and session.edited) are written at epoch 0 before any claim; a claim carries its own epoch; every other event the
// epoch of the last claim (an event of another epoch was written by a
// fenced owner, or by a writer that never claimed the session).
func CheckOwner(s *State, e event.Event) error {
	switch e.Type {
	case event.SessionCreated, event.SessionForked, event.TurnForked, event.SessionEdited:
		if e.Epoch != 0 || s.Epoch != 0 {
			return fmt.Errorf("event %d.%d %q at epoch %d, the session's claims at %d: %w", e.Seq, e.Index, e.Type, e.Epoch, s.Epoch, ErrNotOwner)
		}
	case event.SessionClaimed:
		d, err := event.DecodeAs[event.SessionClaimedData](e)
		if err != nil {
			return err
		}
		if e.Epoch != d.Epoch {
			return fmt.Errorf("event %d.%d claims epoch %d in a record of epoch %d: %w", e.Seq, e.Index, d.Epoch, e.Epoch, ErrNotOwner)
		}
	default:
		if e.Epoch != s.Epoch {
			return fmt.Errorf("event %d.%d %q at epoch %d, the session's owner holds epoch %d: %w", e.Seq, e.Index, e.Type, e.Epoch, s.Epoch, ErrNotOwner)
		}
	}
	return nil
}
