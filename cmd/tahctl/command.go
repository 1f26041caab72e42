package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tah-dev/tah/wire"
)

// command asks the API to publish a command (cancel, compact) for session sid
// and waits, up to wait, for its outcome on a reply subject of its own.
func (c *client) command(ctx context.Context, name, sid string, extra map[string]any, wait time.Duration) (wire.Outcome, error) {
	var o wire.Outcome
	replyTo := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(replyTo)
	if err != nil {
		return o, err
	}
	defer sub.Unsubscribe()
	req := map[string]any{"session": sid, "reply_to": replyTo}
	for k, v := range extra {
		req[k] = v
	}
	var r wire.CommandReply
	if err := c.call(ctx, name, req, &r); err != nil {
		return o, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return o, errorf(exitUnavailable, "`tahctl show "+sid+"` tells the session's state; raise --timeout if the node is busy",
			"the node took the %s command but did not say how it ended within %v", name, wait)
	}
	if err := json.Unmarshal(m.Data, &o); err != nil {
		return o, fmt.Errorf("the node's outcome is not JSON: %v", err)
	}
	if o.Failure != "" {
		return o, inputFailure(sid, o.FailureCode, o.Failure)
	}
	return o, nil
}
