package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// Claims without the log's tail. A node that claims a session
// (session.claimed, fenced) tells the node whose claim was the last before
// its own, which it knows from the log it replayed, on that node's
// wire.ClaimNoticeSubject: an actor of the session still alive there is
// stale, and stops at once, cancelling its LLM and tool calls, instead of
// running on until an append of its own fails against the fence. This is
// what lets a worker (Options.Worker), which follows no shard of the log,
// learn of the claims that concern it; a node with a read model hears them
// from its projector's tail as well (telling an actor twice does nothing
// more). A notice that is lost costs that wait only: the stale actor's
// appends stay fenced.

// hearClaims subscribes to this node's claim notices, which it hands to
// onClaim, until the node closes.
func (n *Node) hearClaims() error {
	sub, err := n.bus.Conn().Subscribe(wire.ClaimNoticeSubject(n.ID()), func(m *nats.Msg) {
		var c wire.ClaimNotice
		if json.Unmarshal(m.Data, &c) != nil || event.ValidSessionID(c.Session) != nil || c.Epoch == 0 {
			n.log.Debug("claim notice dropped: not a wire.ClaimNotice", "subject", m.Subject)
			return
		}
		n.Metrics.claimNotices.WithLabelValues("received").Inc()
		n.log.Debug("claim notice", "session", c.Session, "epoch", c.Epoch, "by", c.Node)
		n.onClaim(c.Session, c.Epoch)
	})
	if err != nil {
		return fmt.Errorf("node: listening to claim notices: %w", err)
	}
	n.closers = append(n.closers, func(context.Context) error {
		// A closed connection took the subscription with it.
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("node: claim notices: %w", err)
		}
		return nil
	})
	return nil
}

// tellPrevious is the session actors' Claimed hook: once this node's claim
// of session sid with epoch is in the log, it tells prevNode, whose claim
// (prevEpoch) was the last before it. Nobody is told of a session's first
// claim, nor of a claim that follows this node's own (one node holds one
// actor per session). Core NATS, fire and forget: it never blocks the load.
func (n *Node) tellPrevious(sid string, epoch uint64, prevNode string, prevEpoch uint64) {
	if prevNode == "" || prevNode == n.ID() {
		return
	}
	body, err := json.Marshal(wire.ClaimNotice{Session: sid, Epoch: epoch, Node: n.ID()})
	if err == nil {
		err = n.bus.Conn().Publish(wire.ClaimNoticeSubject(prevNode), body)
	}
	if err != nil {
		n.log.Debug("claim notice not sent: the previous owner learns of the claim when its next append is fenced",
			"session", sid, "to", prevNode, "its_epoch", prevEpoch, "err", err)
		return
	}
	n.Metrics.claimNotices.WithLabelValues("sent").Inc()
}
