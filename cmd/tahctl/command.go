package main

import (
	"context"
	"errors"

	"github.com/tah-dev/tah/auth"
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
		return usageError(tryFile, "%v", err)
	case errors.Is(err, client.ErrMalformedInput):
		return usageError("`tahctl help`", "%v", err)
	case errors.Is(err, client.ErrPermissionDenied):
		return c.denied("send a "+string(cmd)+" input to "+sid, err)
	case errors.Is(err, client.ErrNoNode):
		return errorf(exitUnavailable, "start a TAH node first: `tah-node`", "no TAH node at %s: %v", c.ep.url, err)
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(exitUnavailable, "`tahctl show "+sid+"` tells the session's state; raise --timeout if the node is busy",
			"the node took the %s command but did not say how it ended in time", cmd)
	}
	return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "the %s input: %v", cmd, err)
}

// denied is the error of an operation that NATS refused to tahctl's
// credential: its role does not allow it (an observer's send, say).
func (c *conn) denied(what string, err error) error {
	who := "tahctl's connection has no credential and"
	if c.ep.creds != "" {
		who = "the credential " + c.ep.creds
		if role, rerr := auth.CredsRole(c.ep.creds); rerr == nil && role != "" {
			who += " (role " + string(role) + ")"
		}
	}
	return errorf(exitUnavailable,
		"use a credential whose role may, with --creds FILE: a client's or an admin's (`tahctl creds add --role client NAME` issues one; docs/security.md lists what each role may do)",
		"permission denied: %s may not %s (%v)", who, what, err)
}
