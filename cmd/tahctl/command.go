package main

import (
	"context"
	"errors"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

// inputFailed is the error of a command (an input) for session sid that
// could not be sent, or that the node could not carry out.
func (c *conn) inputFailed(sid string, cmd wire.Command, err error) error {
	var ce *client.CommandError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return inputFailure(sid, ce.Code, ce.Message)
	case errors.Is(err, client.ErrNotFound):
		return notFound(sid)
	case errors.Is(err, client.ErrPayloadTooLarge):
		return usageError("put the text in a file under the node's tools root and ask the agent to read it", "%v", err)
	case errors.Is(err, client.ErrMalformedInput):
		return usageError("`tahctl help`", "%v", err)
	case errors.Is(err, client.ErrNoNode):
		return errorf(exitUnavailable, "start a TAH node first: `tah-node`", "no TAH node at %s: %v", c.ep.url, err)
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(exitUnavailable, "`tahctl show "+sid+"` tells the session's state; raise --timeout if the node is busy",
			"the node took the %s command but did not say how it ended in time", cmd)
	}
	return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "the %s input: %v", cmd, err)
}
