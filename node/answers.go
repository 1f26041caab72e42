package node

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/agents"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// answerBy is the decision's "by" of an answer to a query chunk.
const answerBy = "agent protocol caller"

// startAnswers turns the answers to agent protocol query chunks, kept in
// wire.AnswerStream (and wire.TenantAnswerStream, tenants' sessions'), into
// approve and deny inputs, through a durable consumer of each that every
// node pulls from: an answer survives the death of the node that was to
// take it. An answer is acknowledged once its input is stored.
func (n *Node) startAnswers(ctx context.Context) error {
	if err := n.consumeAnswers(ctx, n.bus.Answers(), wire.AnswerConsumer, wire.AnswerSubjects); err != nil {
		return err
	}
	return n.consumeAnswers(ctx, n.bus.TenantAnswers(), wire.TenantAnswerConsumer, wire.TenantAnswerSubjects)
}

// consumeAnswers takes the answers of stream s through its durable
// consumer name, filtered on subjects.
func (n *Node) consumeAnswers(ctx context.Context, s jetstream.Stream, name, subjects string) error {
	if s == nil {
		return nil
	}
	// Tried again while JetStream is slow or electing (nodes starting together
	// on a loaded machine), within the time a node has to be ready, as the
	// streams' setup is: a timeout here is no reason to fail the start.
	rctx, cancel := context.WithTimeout(ctx, n.bus.Config().ReadyTimeout)
	defer cancel()
	var cons jetstream.Consumer
	err := natsx.Retry(rctx, 5*time.Second, func(ctx context.Context) error {
		var err error
		cons, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
			FilterSubject: subjects, MaxAckPending: 1000,
			Description: "TAH nodes: answers to agent protocol queries, turned into approve and deny inputs",
		})
		return err
	}, func(err error) { n.log.Warn("answers consumer: retrying", "err", err) })
	if err != nil {
		return fmt.Errorf("node: answers consumer: %w", err)
	}
	cc, err := cons.Consume(n.takeAnswer)
	if err != nil {
		return fmt.Errorf("node: answers consumer: %w", err)
	}
	n.closers = append(n.closers, func(context.Context) error { cc.Stop(); return nil })
	return nil
}

// takeAnswer stores the approve or deny an answer says; an answer that
// names no call is dropped.
func (n *Node) takeAnswer(m jetstream.Msg) {
	sid, callID, ok := wire.AnswerCall(m.Subject())
	if !ok {
		_ = m.TermWithReason("not an answer subject")
		return
	}
	md, err := m.Metadata()
	if err != nil {
		_ = m.TermWithReason("no metadata")
		return
	}
	in := AnswerInput(callID, m.Data())
	in.ID = "answer:" + strconv.FormatUint(md.Sequence.Stream, 10)
	// A signed answer names who decided (§13.8: its signature and subject,
	// as stored; no replay window, the stream's redelivery being by
	// design). A signature that does not verify is evidence of tampering:
	// the answer is dropped, and the query still awaits one.
	switch s, trust, err := wire.VerifyStoredAgentSender(m.Headers().Get(wire.HeaderAgentSender), m.Subject(), m.Data()); {
	case err != nil:
		n.log.Warn("answer to a query dropped: its Agent-Sender header is refused", "session", sid, "call", callID, "err", err)
		_ = m.TermWithReason("Agent-Sender: " + err.Error())
		return
	case trust == wire.SenderVerified:
		in.Sender = agents.AttestedToken(s, n.senderName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.bus.PublishInput(ctx, sid, in); err != nil {
		n.log.Warn("answer to a query not stored yet; it is taken again", "session", sid, "call", callID, "err", err)
		_ = m.NakWithDelay(2 * time.Second)
		return
	}
	_ = m.Ack()
}

// AnswerInput is the input an answer to the query of call callID asks for:
// "yes" (or y, approve, allow, ok; any case) approves the call; "no" (n,
// deny) denies it; any other text denies it and is told to the model as the
// note. The answer is plain text or an envelope whose prompt is the text.
func AnswerInput(callID string, data []byte) wire.Input {
	text := strings.TrimSpace(string(data))
	if env, err := agents.ParseRequest(bytes.TrimSpace(data)); err == nil {
		text = strings.TrimSpace(env.Prompt)
	}
	d := &wire.Decision{Calls: []string{callID}, By: answerBy}
	switch strings.ToLower(strings.TrimRight(text, ".!")) {
	case "yes", "y", "approve", "approved", "allow", "ok":
		return wire.Input{Command: wire.CommandApprove, Decision: d}
	case "no", "n", "deny", "denied":
	default:
		d.Note = text
	}
	return wire.Input{Command: wire.CommandDeny, Decision: d}
}
