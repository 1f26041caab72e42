package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	// CommandCancel cancels the running turn or compaction.
	CommandCancel Command = "cancel"
	// CommandCompact summarises the turns so far.
	CommandCompact Command = "compact"
)

// Valid reports whether c is one of the four commands.
func (c Command) Valid() bool {
	switch c {
	case CommandRun, CommandResume, CommandCancel, CommandCompact:
		return true
	}
	return false
}

// Input is an input or command for a session: the JSON body of a message on
// tah.sess.<sid>.in. Command is not part of the body but the Tah-Command
// header. Receivers ignore fields they do not know.
type Input struct {
	// ID identifies the input; a redelivery carries the same one, and the turn
	// it starts records it (turn.started input_id). It is also the message's
	// Nats-Msg-Id, so that a publish retried within two minutes is stored once.
	// PublishInput generates one when it is empty. 1 to 128 characters of
	// letters, digits, '-', '_', '.' and ':'.
	ID string `json:"id,omitempty"`
	// Command is carried by the Tah-Command header.
	Command Command `json:"-"`
	// ReplyTo, carried by the optional Tah-Reply-To header, is a core NATS
	// subject where the node that runs the command publishes its outcome when
	// it ends. (The stored message's own reply subject was used for the
	// publish acknowledgement.)
	ReplyTo string `json:"-"`
	// Text is the user's message of a run, as plain text.
	Text string `json:"input,omitempty"`
	// Message is the user's message of a run as a full message (role "user"),
	// instead of Text.
	Message *llm.Message `json:"message,omitempty"`
	// Reason says why, for a cancel.
	Reason string `json:"reason,omitempty"`
	// Options adjust the turn a run starts.
	Options *RunOptions `json:"options,omitempty"`
}

// RunOptions adjust one turn.
type RunOptions struct {
	// MaxSteps overrides the session's maxSteps for this turn; 0 keeps it.
	MaxSteps int `json:"max_steps,omitempty"`
}

// UserMessage is the user message of a run: Message, or Text as a user message.
func (in Input) UserMessage() llm.Message {
	if in.Message != nil {
		return in.Message.Clone()
	}
	return llm.User(in.Text)
}

// Validate reports, wrapping ErrMalformedInput, what is wrong with in.
func (in Input) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrMalformedInput)...)
	}
	if in.ID != "" {
		if err := validInputID(in.ID); err != nil {
			return bad("%v", err)
		}
	}
	if in.ReplyTo != "" && !validSubject(in.ReplyTo) {
		return bad("%s %q is not a subject to publish to", HeaderReplyTo, in.ReplyTo)
	}
	if !in.Command.Valid() {
		if in.Command == "" {
			return bad("no command (set the %s header to run, resume, cancel or compact)", HeaderCommand)
		}
		return bad("unknown command %q (use run, resume, cancel or compact)", in.Command)
	}
	if in.Command != CommandRun {
		if in.Text != "" || in.Message != nil || in.Options != nil {
			return bad("%s takes no input, message or options (those are for run)", in.Command)
		}
		if in.Reason != "" && in.Command != CommandCancel {
			return bad("%s takes no reason (that is for cancel)", in.Command)
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
	case in.Reason != "":
		return bad("run takes no reason (that is for cancel)")
	case in.Options != nil && in.Options.MaxSteps < 0:
		return bad("options.max_steps is negative")
	}
	return nil
}

// validSubject reports whether s is a subject one can publish to: dot-separated
// non-empty tokens without wildcards or whitespace.
func validSubject(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

func validInputID(id string) error {
	if len(id) > 128 {
		return fmt.Errorf("input id is %d bytes, at most 128 allowed", len(id))
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return fmt.Errorf("input id %q: character %q at %d is not allowed", id, r, i)
		}
	}
	return nil
}

// PublishInput sends in to session sid through TAH_IN and returns its id
// (generated when in.ID is empty) once the stream has stored it. It fails with
// ErrInvalidSessionID, ErrMalformedInput (in does not validate) or
// ErrPayloadTooLarge. Errors the node finds later (an unknown session, say)
// are reported on tah.sess.<sid>.err: see SubscribeErrors.
func (b *Bus) PublishInput(ctx context.Context, sid string, in Input) (string, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return "", err
	}
	if in.ID == "" {
		in.ID = event.NewID("in_")
	}
	if err := in.Validate(); err != nil {
		return "", err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	m := nats.NewMsg(InputSubject(sid))
	m.Data = body
	m.Header.Set(HeaderCommand, string(in.Command))
	m.Header.Set(HeaderMsgID, in.ID)
	if in.ReplyTo != "" {
		m.Header.Set(HeaderReplyTo, in.ReplyTo)
	}
	if size, limit := msgSize(m), b.MaxPayload(); size > limit {
		return "", fmt.Errorf("input %s for session %s is %d bytes, over the server's max payload of %d bytes: %w", in.ID, sid, size, limit, ErrPayloadTooLarge)
	}
	if err := publishRetrying(ctx, b.js, m); err != nil {
		return "", fmt.Errorf("publish input %s for session %s: %w", in.ID, sid, err)
	}
	return in.ID, nil
}

// publishRetrying publishes m to a stream, trying again in short tries until
// ctx ends while the stream does not answer: it is electing a leader (a
// server died) for a few seconds. m must carry a Nats-Msg-Id, so that a try
// whose acknowledgement was lost is stored once.
func publishRetrying(ctx context.Context, js jetstream.JetStream, m *nats.Msg) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, publishTry)
		_, err := js.PublishMsg(tctx, m)
		cancel()
		if err == nil || ctx.Err() != nil || !temporarilyUnavailable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// publishTry bounds one try of publishRetrying.
const publishTry = 2 * time.Second

// parseInput reads an input from a message of TAH_IN stored at seq.
func parseInput(m *nats.Msg, seq uint64) (Input, error) {
	in := Input{Command: Command(m.Header.Get(HeaderCommand)), ReplyTo: m.Header.Get(HeaderReplyTo)}
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &in); err != nil {
			return in, fmt.Errorf("body is not an input JSON object: %v: %w", err, ErrMalformedInput)
		}
	}
	if in.ID == "" {
		in.ID = m.Header.Get(HeaderMsgID)
	}
	if err := in.Validate(); err != nil {
		return in, err
	}
	if in.ID == "" {
		in.ID = "in-" + strconv.FormatUint(seq, 10)
	}
	return in, nil
}

// Codes of input errors reported by this package. Handlers may report others
// with InputMsg.Reject.
const (
	// CodeMalformedInput: the message was not an input (see ErrMalformedInput).
	CodeMalformedInput = "malformed_input"
)

// InputError reports an input that was refused: the body of a message on the
// core NATS subject tah.sess.<sid>.err.
type InputError struct {
	Session string `json:"session"`
	// InputID is the refused input's id, when it could be read.
	InputID string `json:"input_id,omitempty"`
	// Command is the Tah-Command header of the refused message.
	Command Command `json:"command,omitempty"`
	// Seq is the refused message's sequence in TAH_IN.
	Seq uint64 `json:"seq,omitempty"`
	// Code classifies the error (CodeMalformedInput, or a handler's code).
	Code string `json:"code"`
	// Error says what was wrong, for people.
	Error string `json:"error"`
}

// reportInputError publishes ie on the session's error subject, and on
// replyTo too when it is not empty.
func (b *Bus) reportInputError(ie InputError, replyTo string) error {
	body, err := json.Marshal(ie)
	if err != nil {
		return err
	}
	var errs []error
	for _, subj := range []string{ErrorSubject(ie.Session), replyTo} {
		if subj == "" {
			continue
		}
		m := nats.NewMsg(subj)
		m.Data = body
		if ie.InputID != "" {
			m.Header.Set(HeaderInputID, ie.InputID)
		}
		errs = append(errs, b.nc.PublishMsg(m))
	}
	return errors.Join(errs...)
}

// SubscribeErrors calls fn for each error reported about session sid's inputs
// (core NATS, not stored: subscribe before publishing the input). ctx bounds
// the setup; the subscription runs until Stop.
func (b *Bus) SubscribeErrors(ctx context.Context, sid string, fn func(InputError)) (*Subscription, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	s, err := b.subscribe(ErrorSubject(sid), func(m *nats.Msg) {
		var ie InputError
		if json.Unmarshal(m.Data, &ie) == nil {
			fn(ie)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := b.flush(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("subscribe errors of %s: %w", sid, err)
	}
	return s, nil
}
