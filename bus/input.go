package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// PublishInput sends in to session sid through TAH_IN and returns its id
// (generated when in.ID is empty) once the stream has stored it, trying again
// while the stream elects a leader (natsx.PublishRetrying: the id makes every
// try the same message). It fails with ErrInvalidSessionID, ErrMalformedInput
// (in does not validate) or ErrPayloadTooLarge. Errors the node finds later
// (an unknown session, say) are reported on tah.sess.<sid>.err: see
// SubscribeErrors. The input's sender is the node ($node), or in.Sender
// when it is a caller the agent gateway attested
// (wire.AttestedSenderPrefix): recorded as who ran the turn or decided.
func (b *Bus) PublishInput(ctx context.Context, sid string, in wire.Input) (string, error) {
	sender := wire.NodeSender
	if _, ok := wire.AttestedSender(in.Sender); ok {
		sender = in.Sender // a caller the agent gateway verified
	}
	m, id, err := natsx.NewInputMsg(sid, sender, in, int64(b.MaxPayload()))
	if err != nil {
		return "", err
	}
	telemetry.Inject(ctx, m.Header) // the caller's trace goes on in the turn (W3C headers)
	if _, err := b.storeInput(ctx, m); err != nil {
		return "", fmt.Errorf("publish input %s for session %s: %w", id, sid, err)
	}
	return id, nil
}

// storeInput stores m in TAH_IN and returns its sequence: alone, or with
// the other inputs this node stores at the same moment as one atomic batch
// (TAH_IN's committer, batch.go). Alone it is retried in tries of
// natsx.PublishTry with its Nats-Msg-Id, so that it is stored once however
// often it is sent; after a batch that failed (its answer lost, say) it is
// sent alone in the same way, and the duplicate window answers with the
// batch's sequence when the batch did land.
func (b *Bus) storeInput(ctx context.Context, m *nats.Msg) (uint64, error) {
	alone := func(ctx context.Context) (uint64, error) {
		ack, err := natsx.PublishRetrying(ctx, b.js, m, nil)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	if m.Header.Get(wire.HeaderMsgID) == "" {
		return 0, natsx.ErrNoMsgID // a batch's member could not be sent again
	}
	c := b.inputCommit
	if !inputStreamSubject(m.Subject) {
		c = nil // stored by TAH_TIN, which TAH_IN sources: a batch is one stream's
	}
	if size := natsx.MsgSize(m); c != nil && size+batchHeaders <= b.MaxPayload() {
		return c.send(ctx, m, size, alone, func(ctx context.Context, _ bool) (uint64, error) { return alone(ctx) })
	}
	return alone(ctx)
}

// parseInput reads an input from a message of TAH_IN stored at seq. The
// body's id is the input's; without one, the id its Nats-Msg-Id names
// (wire.InputIDOfMsgID: "<sid>:<id>", or a bare id).
func parseInput(m *nats.Msg, seq uint64) (wire.Input, error) {
	in := wire.Input{Command: wire.Command(m.Header.Get(wire.HeaderCommand)), ReplyTo: m.Header.Get(wire.HeaderReplyTo)}
	msgID := wire.InputIDOfMsgID(wire.SessionFromSubject(m.Subject), m.Header.Get(wire.HeaderMsgID))
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &in); err != nil {
			in.ID = msgID // for the refusal
			return in, fmt.Errorf("body is not an input JSON object: %v: %w", err, ErrMalformedInput)
		}
	}
	if in.ID == "" {
		in.ID = msgID
	}
	if err := in.Validate(); err != nil {
		return in, err
	}
	if in.ID == "" {
		in.ID = "in-" + strconv.FormatUint(seq, 10)
	}
	authenticatedBy(&in, m.Subject)
	return in, nil
}

// authenticatedBy records, as who decided an approve, a deny or a budget
// change, the sender the input's subject names
// (tah.in.<p>.<sid>.<sender>, tah.in.<p>.<tenant>.<id>.<sender>), which the
// server pinned to the publisher's credential's name, over the body's
// informative by; and, for a sender the node's agent gateway attested
// (wire.AttestedSenderPrefix), the caller it verified. The node's own
// inputs ($node) and the default tenant's that name no sender (a client's
// without a name, or whose credential predates named inputs) keep the
// body's.
func authenticatedBy(in *wire.Input, subject string) {
	_, sender, ok := wire.InputOfSubject(subject)
	if !ok {
		return
	}
	if attested, ok := wire.AttestedSender(sender); ok {
		sender = attested
	} else if wire.ValidCredentialName(sender) != nil {
		return
	}
	in.Sender = sender // who ran or cancelled a turn (turn.started, agent.cancelled)
	switch in.Command {
	case wire.CommandApprove, wire.CommandDeny, wire.CommandBudget:
	default:
		return
	}
	if in.Decision == nil {
		in.Decision = &wire.Decision{}
	}
	in.Decision.By = sender
}

// inputStreamSubject reports whether TAH_IN itself stores subj: the
// default tenant's inputs that name their sender,
// tah.sess.<sid>.in.by.<sender>.
func inputStreamSubject(subj string) bool {
	parts := strings.Split(subj, ".")
	return len(parts) == 6 && parts[0] == "tah" && parts[1] == "sess" && parts[3] == "in" && parts[4] == "by"
}

// reportRefusal publishes the refusal o on the session's error subject, and
// on replyTo too when it is not empty: as an agent protocol error and the
// end of the stream when the input's reply is wire.ReplyAgents.
func (b *Bus) reportRefusal(o wire.Outcome, replyTo, reply string) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var errs []error
	if reply == wire.ReplyAgents && replyTo != "" {
		errs = append(errs, natsx.PublishAgentError(b.nc, replyTo, wire.AgentStatusOf(o.FailureCode),
			wire.AgentError{Error: o.FailureCode, Message: o.Failure, Session: o.Session}))
		replyTo = ""
	}
	for _, subj := range []string{wire.ErrorSubject(o.Session), replyTo} {
		if subj == "" {
			continue
		}
		m := nats.NewMsg(subj)
		m.Data = body
		if o.InputID != "" {
			m.Header.Set(wire.HeaderInputID, o.InputID)
		}
		errs = append(errs, b.nc.PublishMsg(m))
	}
	return errors.Join(errs...)
}

// SubscribeErrors calls fn for each error reported about session sid's inputs
// (core NATS, not stored: subscribe before publishing the input). ctx bounds
// the setup; the subscription runs until Stop.
func (b *Bus) SubscribeErrors(ctx context.Context, sid string, fn func(wire.Outcome)) (*Subscription, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	s, err := b.subscribe(wire.ErrorSubject(sid), func(m *nats.Msg) {
		var o wire.Outcome
		if json.Unmarshal(m.Data, &o) == nil {
			fn(o)
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
