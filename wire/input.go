package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Command is what an input asks of a session. It travels in the Tah-Command
// header of a message on tah.sess.<sid>.in.
type Command string

// The commands.
const (
	// CommandRun starts a turn with a user message (Input.Text or Input.Message).
	CommandRun Command = "run"
	// CommandResume continues an interrupted turn from the log.
	CommandResume Command = "resume"
	// CommandCancel cancels the running turn or compaction, or, with
	// Input.InputID, only the work of that input.
	CommandCancel Command = "cancel"
	// CommandCompact summarises the turns so far.
	CommandCompact Command = "compact"
	// CommandApprove approves tool calls awaiting approval (Input.Calls, all
	// of them when empty), perhaps with edited arguments (Input.Arguments).
	CommandApprove Command = "approve"
	// CommandDeny denies tool calls awaiting approval (Input.Calls, all of
	// them when empty), with Input.Note for the model.
	CommandDeny Command = "deny"
	// CommandBudget changes the session's budget (Input.Budget), and the
	// current turn's own limits it names: recorded in budget.set. A turn
	// that failed at its budget then goes on with a resume.
	CommandBudget Command = "budget"
)

// InputMsgID is the Nats-Msg-Id of input id of session sid: "<sid>:<id>".
// TAH_IN remembers the Nats-Msg-Id of every message for DuplicateWindow and
// drops a message whose id it saw, whatever its subject: the session in the
// message id is what keeps two sessions' inputs of one id apart, so that an
// input id need only be unique within its session.
func InputMsgID(sid, id string) string { return sid + ":" + id }

// InputIDOfMsgID is the input id that the Nats-Msg-Id msgID of an input of
// session sid names: what follows "<sid>:" (InputMsgID), or msgID whole
// (a bare id, as clients that predate InputMsgID send: still taken, though
// TAH_IN then de-duplicates it against every session's inputs).
func InputIDOfMsgID(sid, msgID string) string {
	if id, ok := strings.CutPrefix(msgID, sid+":"); ok && sid != "" && id != "" {
		return id
	}
	return msgID
}

// Valid reports whether c is one of the commands.
func (c Command) Valid() bool {
	switch c {
	case CommandRun, CommandResume, CommandCancel, CommandCompact, CommandApprove, CommandDeny, CommandBudget:
		return true
	}
	return false
}

// Input is an input or command for a session: the JSON body of a message on
// tah.sess.<sid>.in. Command and ReplyTo are not part of the body but the
// headers Tah-Command and Tah-Reply-To. Receivers ignore fields they do not
// know.
type Input struct {
	// ID identifies the input within its session; a redelivery carries the
	// same one, and the turn it starts records it (turn.started input_id).
	// The message's Nats-Msg-Id is InputMsgID(session, ID), so that a
	// publish retried within DuplicateWindow is stored once, and the same id
	// in another session is another input. 1 to 128 characters of letters,
	// digits, '-', '_', '.' and ':'. When absent, a node uses the id that
	// Nats-Msg-Id names (InputIDOfMsgID), then "in-<stream sequence>".
	ID string `json:"id,omitempty"`
	// Sender is the name of the credential that sent the input, as its
	// subject names it (a tenant's session's: tah.in.<p>.<tenant>.<id>.<sender>,
	// which the server pins to the publisher's credential); never read
	// from the body. Empty for the default tenant's inputs.
	Sender string `json:"-"`
	// Command is carried by the Tah-Command header.
	Command Command `json:"-"`
	// ReplyTo, carried by the optional Tah-Reply-To header, is a core NATS
	// subject where the node that runs the command publishes its Outcome when
	// it ends: one under the client's inbox (CheckReplySubject). (The stored message's own reply subject is the publish
	// acknowledgement's.)
	ReplyTo string `json:"-"`
	// Text is the user's message of a run, as plain text.
	Text string `json:"input,omitempty"`
	// Message is the user's message of a run as a full message (role "user"),
	// instead of Text.
	Message *llm.Message `json:"message,omitempty"`
	// Reason says why, for a cancel; it is recorded in agent.cancelled.
	Reason string `json:"reason,omitempty"`
	// InputID, on a cancel, names the one input whose work it cancels, so
	// that a client cancels what it started and nothing else: that input's
	// turn (or compaction) if it runs or waits for approval; the input
	// itself, withdrawn without running (its outcome fails with
	// FailureWithdrawn), if it waits in the session's queue; nothing when
	// it has ended or is not there. Empty: whatever work runs.
	InputID string `json:"input_id,omitempty"`
	// Options adjust the turn a run starts.
	Options *RunOptions `json:"options,omitempty"`
	// Reply, for a run with a ReplyTo, says how the turn is answered there:
	// empty, one Outcome when the command ends; ReplyAgents, the turn as an
	// agent protocol stream (chunks, then the terminator), from whichever
	// node works on it, until it ends (docs/agent-protocol.md).
	Reply string `json:"reply,omitempty"`
	// Budget is the change of a budget command.
	Budget *BudgetChange `json:"budget,omitempty"`
	// Decision is the payload of an approve or a deny.
	*Decision
}

// Decision is what an approve or a deny says (its fields sit in the input's
// body, beside id).
type Decision struct {
	// Calls are the ids of the calls decided; empty: every call that awaits
	// approval.
	Calls []string `json:"calls,omitempty"`
	// Note is told to the model with a denial ("denied by the user: <note>")
	// and recorded with either decision.
	Note string `json:"note,omitempty"`
	// Arguments, for an approve of exactly one call, replace the model's
	// arguments of the call: a JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// By says who decided, as the client says (tahctl: its credential's
	// name). The node records it as given: it is informative, not
	// authenticated (see docs/security.md); but in a tenant's session the
	// node records the sender its subject names instead (InputSubject),
	// which the server pinned to the publisher's credential.
	By string `json:"by,omitempty"`
	// Expired, on a deny, denies the calls whose approval deadline passed,
	// and nothing while it has not: what the node schedules at a wait's
	// deadline (ApprovalDeadlineSchedule), so that the deadline holds
	// although no node holds the session then.
	Expired bool `json:"expired,omitempty"`
}

// validate reports what is wrong with a decision of command c.
func (d *Decision) validate(c Command) error {
	if d == nil {
		return nil
	}
	if c == CommandBudget && len(d.Calls) == 0 && d.Note == "" && len(d.Arguments) == 0 {
		return nil // by: who changed the budget
	}
	if c != CommandApprove && c != CommandDeny {
		return fmt.Errorf("%s takes no calls, note, arguments or by (those are for approve and deny)", c)
	}
	if d.Expired && (c != CommandDeny || len(d.Calls) > 0 || d.Note != "" || len(d.Arguments) > 0) {
		return errors.New("expired goes with a deny alone (no calls, note or arguments): it denies the calls whose deadline passed")
	}
	if len(d.Arguments) > 0 {
		if c != CommandApprove || len(d.Calls) != 1 {
			return errors.New("arguments go with an approve of exactly one call (calls: [its id])")
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(d.Arguments, &obj); err != nil || obj == nil {
			return errors.New("arguments are not a JSON object")
		}
	}
	for _, id := range d.Calls {
		if id == "" {
			return errors.New("calls holds an empty id")
		}
	}
	return nil
}

// RunOptions adjust one turn.
type RunOptions struct {
	// MaxSteps overrides the session's maxSteps for this turn; 0 keeps it.
	MaxSteps int `json:"max_steps,omitempty" jsonschema:"minimum=0"`
	// Budget is the turn's own limits (tokens, cost, wall time): the
	// tightest of them, the session's budget and the node's is in force.
	Budget *event.Limits `json:"budget,omitempty"`
	// IfIdle refuses the run (failure code busy) when the session runs a
	// turn, has one waiting for approval or for its resume, or has inputs
	// queued before it, instead of queueing it behind them.
	IfIdle bool `json:"if_idle,omitempty"`
	// WhenBusy says what the run does when the session is running a turn:
	// WhenBusyQueue (or absent) waits for it to end, WhenBusySteer joins
	// it, WhenBusyInterrupt cancels it and starts right after. Not with
	// IfIdle, which refuses instead.
	WhenBusy WhenBusy `json:"when_busy,omitempty" jsonschema:"enum=queue,enum=steer,enum=interrupt"`
}

// WhenBusy is what a run does when its session is busy (RunOptions.WhenBusy).
type WhenBusy string

// What a run may do when its session is busy.
const (
	// WhenBusyQueue waits behind the running turn and the inputs queued
	// before it: the default.
	WhenBusyQueue WhenBusy = "queue"
	// WhenBusySteer adds the message to the running turn at its next step
	// boundary, before its next LLM call (turn.steered): the model sees it
	// without the turn ending. The run's outcome is that turn's. A turn
	// that waits for approval takes it at once (the model sees it after the
	// decision); a turn that ends before another LLM call, a compaction
	// that runs, or an idle session, runs it as its own turn, ahead of the
	// queue.
	WhenBusySteer WhenBusy = "steer"
	// WhenBusyInterrupt cancels the running turn (or compaction, or the
	// turn waiting for approval), every call paired, agent.cancelled
	// naming it (interrupted_by), and starts its own turn right after,
	// ahead of the queue.
	WhenBusyInterrupt WhenBusy = "interrupt"
)

// Valid reports whether w is one of the WhenBusy values or empty (queue).
func (w WhenBusy) Valid() bool {
	switch w {
	case "", WhenBusyQueue, WhenBusySteer, WhenBusyInterrupt:
		return true
	}
	return false
}

// WhenBusy is the run's options.when_busy, WhenBusyQueue when not given.
func (in Input) WhenBusy() WhenBusy {
	if in.Options == nil || in.Options.WhenBusy == "" {
		return WhenBusyQueue
	}
	return in.Options.WhenBusy
}

// UserMessage is the user message of a run: Message, or Text as a user message.
func (in Input) UserMessage() llm.Message {
	if in.Message != nil {
		return in.Message.Clone()
	}
	return llm.User(in.Text)
}

// Caller is who waits for the turn of a run as a stream (Reply and
// ReplyTo), or nil.
func (in Input) Caller() *Caller {
	if in.Reply == "" || in.ReplyTo == "" || in.Command != CommandRun {
		return nil
	}
	return &Caller{Protocol: in.Reply, ReplyTo: in.ReplyTo}
}

// MaxSteps is the run's options.max_steps, 0 when not given.
func (in Input) MaxSteps() int {
	if in.Options == nil {
		return 0
	}
	return in.Options.MaxSteps
}

// Validate reports, wrapping ErrMalformedInput, what is wrong with in: an
// invalid id, a reply subject outside a client's inbox (also wrapping
// ErrReplySubject: see CheckReplySubject), no or an unknown command, a run without
// exactly one of input and message, or fields its command does not take.
func (in Input) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrMalformedInput)...)
	}
	if in.ID != "" {
		if err := ValidInputID(in.ID); err != nil {
			return bad("%v", err)
		}
	}
	if in.ReplyTo != "" {
		if err := CheckReplySubject(in.ReplyTo); err != nil {
			return fmt.Errorf("%w: %w", err, ErrMalformedInput)
		}
	}
	if !in.Command.Valid() {
		if in.Command == "" {
			return bad("no command (set the %s header to run, resume, cancel, compact, approve, deny or budget)", HeaderCommand)
		}
		return bad("unknown command %q (use run, resume, cancel, compact, approve, deny or budget)", in.Command)
	}
	if err := in.Decision.validate(in.Command); err != nil {
		return bad("%v", err)
	}
	if (in.Budget != nil) != (in.Command == CommandBudget) {
		if in.Budget == nil {
			return bad("budget without a budget to set (give budget: {turn: {...}, session: {...}})")
		}
		return bad("%s takes no budget (that is for the budget command; a run's own limits go in options.budget)", in.Command)
	}
	if in.Budget != nil {
		if err := in.Budget.validate(); err != nil {
			return bad("budget: %v", err)
		}
	}
	if in.Command != CommandRun {
		if in.Text != "" || in.Message != nil || in.Options != nil {
			return bad("%s takes no input, message or options (those are for run)", in.Command)
		}
		if in.Reply != "" {
			return bad("%s takes no reply (that is for run)", in.Command)
		}
		if in.Reason != "" && in.Command != CommandCancel {
			return bad("%s takes no reason (that is for cancel)", in.Command)
		}
		if in.InputID != "" {
			if in.Command != CommandCancel {
				return bad("%s takes no input_id (that is for cancel)", in.Command)
			}
			if err := ValidInputID(in.InputID); err != nil {
				return bad("input_id: %v", err)
			}
		}
		return nil
	}
	switch {
	case in.Text != "" && in.Message != nil:
		return bad("run has both input and message: give one")
	case in.Text == "" && in.Message == nil:
		return bad("run has neither input nor message")
	case in.Message != nil && in.Message.Role != llm.RoleUser:
		return bad("run message has role %q, want %q", in.Message.Role, llm.RoleUser)
	case in.Message != nil && in.Message.Steer:
		return bad("run message sets steer, which only the node sets: ask to steer with options.when_busy %q", WhenBusySteer)
	case in.Options != nil && !in.Options.WhenBusy.Valid():
		return bad("options.when_busy %q is not one of %q, %q, %q", in.Options.WhenBusy, WhenBusyQueue, WhenBusySteer, WhenBusyInterrupt)
	case in.Options != nil && in.Options.IfIdle && in.WhenBusy() != WhenBusyQueue:
		return bad("options.if_idle refuses the run when the session is busy, and when_busy %q says to do otherwise: give one", in.Options.WhenBusy)
	case in.Reason != "":
		return bad("run takes no reason (that is for cancel)")
	case in.InputID != "":
		return bad("run takes no input_id (that is for cancel)")
	case in.Reply != "" && in.Reply != ReplyAgents:
		return bad("unknown reply %q (use %q, or none for one outcome)", in.Reply, ReplyAgents)
	case in.Reply != "" && in.ReplyTo == "":
		return bad("reply %q without a %s header to stream to", in.Reply, HeaderReplyTo)
	case in.Options != nil && in.Options.MaxSteps < 0:
		return bad("options.max_steps is negative")
	case in.Options != nil && in.Options.Budget != nil && !validLimits(*in.Options.Budget):
		return bad("options.budget: a limit is negative or not a number (0 or absent: no limit)")
	}
	return nil
}

// TurnBudget is the run's options.budget, nil when not given or empty.
func (in Input) TurnBudget() *event.Limits {
	if in.Options == nil || in.Options.Budget == nil || in.Options.Budget.IsZero() {
		return nil
	}
	b := *in.Options.Budget
	return &b
}
