package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// showRequest is `tahctl show ID --request STEP`: the request a model call
// sent, which the node rebuilds from the session's log (tah.api.request). The
// request goes to stdout as indented JSON, so that it can be saved as it is;
// whether it matched the hash recorded when it was sent goes to stderr. With
// --json, the API's reply is printed instead. Either way a request that does
// not match its hash is an error (exit status 1), after it is printed.
func showRequest(ctx context.Context, g *globals, c *conn, id, step string) error {
	if _, err := c.getSession(ctx, id); err != nil {
		return err
	}
	stepID, err := c.stepID(ctx, id, step)
	if err != nil {
		return err
	}
	r, err := c.StepRequest(ctx, id, stepID)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == wire.APIErrNotFound:
		return errorf(exitNotFound, "`tahctl show "+id+"` lists its steps (the # column), `--json` their ids", "%s", ae.Message)
	case errors.As(err, &ae) && ae.Code == wire.APIErrBadRequest:
		return usageError("pick a step of kind llm in `tahctl show "+id+"`", "%s", ae.Message)
	case err != nil:
		return c.failed(wire.EndpointRequest, err)
	}
	if g.json {
		if err := printJSON(g.stdout, r); err != nil {
			return err
		}
	} else if err := printRequest(g, r); err != nil {
		return err
	}
	if !r.Verified {
		return errorf(exitFailed, "`tahctl events "+id+"` shows the log; a node of the version that wrote it rebuilds it as it was",
			"the request rebuilt from the log does not match the hash recorded when step %s sent it (sha256 %s): it may differ from what the model received", stepID, r.SHA256)
	}
	return nil
}

// stepID is the id of the model call that STEP names: its # in the
// timeline of `tahctl show` (a number), or its id.
func (c *conn) stepID(ctx context.Context, id, step string) (string, error) {
	s, n, err := c.namedStep(ctx, id, step)
	if err != nil || n == 0 {
		return step, err
	}
	if s.Type != projection.StepLLM {
		return "", usageError("pick a step of kind llm in `tahctl show "+id+"`",
			"step #%d of %s is a %s step (%s): only a model call sends a request", n, id, s.Type, s.ID)
	}
	return s.ID, nil
}

// anyStepID is the id of the step, of any kind, that STEP names: its # in
// the timeline of `tahctl show` (a number), or its id; "" for none.
func (c *conn) anyStepID(ctx context.Context, id, step string) (string, error) {
	if step == "" {
		return "", nil
	}
	s, n, err := c.namedStep(ctx, id, step)
	if err != nil || n == 0 {
		return step, err
	}
	return s.ID, nil
}

// namedStep is the step that STEP names when it is a number, its # in the
// timeline of `tahctl show` (n, from 1); a STEP that is not a number is a
// step's id, taken as it is (n is 0: nothing is asked).
func (c *conn) namedStep(ctx context.Context, id, step string) (projection.Step, int, error) {
	n, err := strconv.Atoi(step)
	if err != nil {
		return projection.Step{}, 0, nil
	}
	r, err := c.Steps(ctx, wire.StepsRequest{Session: id, Brief: true})
	if err != nil {
		return projection.Step{}, 0, c.failed(wire.EndpointSteps, err)
	}
	if n < 1 || n > len(r.Steps) {
		return projection.Step{}, 0, errorf(exitNotFound, "`tahctl show "+id+"` lists its steps (the # column)",
			"session %s has %s: there is no step #%d", id, plural(len(r.Steps), "step"), n)
	}
	return r.Steps[n-1], n, nil
}

// printRequest writes the request as indented JSON to stdout, and what it is
// to stderr.
func printRequest(g *globals, r wire.RequestReply) error {
	st := newStyle(g, g.stderr)
	what := fmt.Sprintf("Request of step %s of %s: %s, %s", r.StepID, r.Session,
		plural(len(r.Request.Messages), "message"), plural(len(r.Request.Tools), "tool"))
	if r.Request.Model != "" {
		what += ", model " + r.Request.Model
	}
	switch {
	case r.Recorded:
		what += st.dim(" (recorded whole in the log)")
	case r.Verified:
		what += st.dim(" (rebuilt from the log;") + st.green(" matches") + st.dim(" the sha256 recorded when it was sent, "+r.SHA256+")")
	default:
		what += st.red(" (rebuilt from the log; does NOT match the sha256 recorded when it was sent, " + r.SHA256 + ")")
	}
	fmt.Fprintln(g.stderr, what)
	enc := json.NewEncoder(g.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r.Request)
}
