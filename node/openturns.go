package node

import (
	"context"
	"errors"
	"slices"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/wire"
)

// resumeOpenTurns resumes the turns that the read model shows open in
// partitions this node just took over: a node that died, or handed them over,
// left them there. Their inputs would come back only after the ack wait (the
// dead node kept them alive until it died); a resume now continues the turn
// at once, and the input, when it comes, is recognised as done. A resume that
// finds nothing open (the read model was behind) does nothing.
func (m *membership) resumeOpenTurns(ctx context.Context, partitions []int) {
	resumed := 0
	for _, status := range []projection.Status{projection.StatusRunning, projection.StatusWaitingTool} {
		opts := store.ListOptions{Status: status, Limit: store.MaxListLimit}
		for {
			page, err := m.n.store.ListSessions(ctx, opts)
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
			opts.Before = page.Next
		}
	}
	if resumed > 0 {
		m.log.Info("resuming the open turns of the partitions taken over", "sessions", resumed, "partitions", partitions)
	}
}
