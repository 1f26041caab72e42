package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/wire"
)

// resumeOpenTurns resumes the turns that the read model shows open in
// partitions this node just took over: a node that died, or handed them over,
// left them there. Their inputs come back only after the ack wait (the dead
// node kept them alive until it died), unless the node was taken for dead on
// the servers' word (takeOverOrphans has them delivered again at once); a
// resume now continues the turn at once, and the input, when it comes, waits
// for it and is recognised as done. A resume that finds nothing open (the
// read model was behind) does nothing.
//
// A worker, which holds no read model, asks the cluster's (tah.api.list
// over its own connection, which only the nodes that hold one answer); with
// none to ask, it resumes nothing, and the inputs bring the turns back.
func (m *membership) resumeOpenTurns(ctx context.Context, partitions []int) {
	resumed := 0
	for _, status := range []projection.Status{projection.StatusRunning, projection.StatusWaitingTool} {
		before := ""
		for {
			page, err := m.openTurns(ctx, status, before)
			if err != nil {
				m.log.Warn("open turns not resumed: their inputs will bring them back", "err", err)
				return
			}
			for _, row := range page.Sessions {
				if !slices.Contains(partitions, wire.Partition(row.ID, m.parts)) {
					continue
				}
				sid := row.ID
				err := m.n.sessions.Deliver(sid, &session.Command{Kind: wire.CommandResume, Done: func(o session.Outcome) {
					if o.Err != nil && !errors.Is(o.Err, session.ErrNothingToResume) {
						m.log.Info("open turn not resumed: its input will bring it back", "session", sid, "err", o.Err)
					}
				}})
				if err == nil {
					resumed++
				}
			}
			if page.Next == "" {
				break
			}
			before = page.Next
		}
	}
	if resumed > 0 {
		m.log.Info("resuming the open turns of the partitions taken over", "sessions", resumed, "partitions", partitions)
	}
}

// openTurns is a page of the sessions in status, from before (a page's
// Next; "" for the first): from this node's read model, or, on a worker,
// from the cluster's.
func (m *membership) openTurns(ctx context.Context, status projection.Status, before string) (wire.ListReply, error) {
	if m.n.store != nil {
		if before == "" {
			m.n.flushReadModel(ctx, m.n.projector().FlushKnown)
		}
		page, err := m.n.store.ListSessions(ctx, store.ListOptions{Status: status, Limit: store.MaxListLimit, Before: before})
		return wire.ListReply{Sessions: page.Sessions, Next: page.Next}, err
	}
	// Known: as this node's own look above, the read model's node waits
	// only for what it heard, not for the heads of shards still electing
	// a leader after the death that brought the partitions here.
	return m.n.listCluster(ctx, wire.ListRequest{Status: status, Limit: wire.ListMax, Before: before, Known: true})
}

// listCluster asks the cluster's read model for a page of sessions
// (tah.api.list, which only the nodes that hold a read model serve), within
// openTurnsWait; wire.ErrNoReadModel when none holds one.
func (n *Node) listCluster(ctx context.Context, req wire.ListRequest) (wire.ListReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return wire.ListReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTurnsWait)
	defer cancel()
	subj := wire.APISubject(wire.EndpointList)
	msg, err := n.bus.Conn().RequestWithContext(ctx, subj, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return wire.ListReply{}, fmt.Errorf("%s: %w", subj, wire.ErrNoReadModel)
	case err != nil:
		return wire.ListReply{}, fmt.Errorf("%s: %w", subj, err)
	}
	if code := msg.Header.Get(wire.HeaderServiceErrorCode); code != "" {
		return wire.ListReply{}, fmt.Errorf("%s: %s %s", subj, code, msg.Header.Get(wire.HeaderServiceError))
	}
	var rep wire.ListReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return wire.ListReply{}, fmt.Errorf("%s: the reply is not a list: %w", subj, err)
	}
	return rep, nil
}

// openTurnsWait bounds a worker's request for a page of open turns: the
// read model's node may be the one that died, and its queue subscription
// lingers until its server notices; the inputs bring the turns back anyway.
const openTurnsWait = 5 * time.Second
