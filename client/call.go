package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// repeatable lists the endpoints that are safe to call again: they only
// read. A create, fork or command that timed out may have been carried out.
var repeatable = map[string]bool{
	wire.EndpointGet: true, wire.EndpointList: true, wire.EndpointMessages: true, wire.EndpointSteps: true,
	wire.EndpointEvents: true, wire.EndpointRequest: true, wire.EndpointTools: true, wire.EndpointStatus: true,
	wire.EndpointArtifacts: true, wire.EndpointArtifact: true, wire.EndpointReplay: true,
}

// request calls an API endpoint with req and decodes its reply.
func request[Rep any](ctx context.Context, c *Client, endpoint string, req any) (Rep, error) {
	var rep Rep
	err := c.call(ctx, endpoint, req, &rep)
	return rep, err
}

// call sends req to tah.api.<endpoint> and decodes the reply into rep, all
// within the request timeout. An endpoint that is safe to repeat is tried up
// to three times, each try within a third of the timeout (at least a second),
// while the tries time out: every node serves the API in one queue group and
// the server hands each request to one member, and a node that is paused or
// cut off keeps its place in the group for a while; another try most likely
// reaches a live node. Other endpoints are tried once.
func (c *Client) call(ctx context.Context, endpoint string, req, rep any) error {
	if c.opts.Tenant != "" && !slices.Contains(wire.TenantEndpoints(), endpoint) {
		// Nothing would answer it (no responders, which says "no node").
		return fmt.Errorf("%s is not a tenant's: a credential of tenant %s calls its tenant's API, which has no %s (docs/protocol.md, A tenant's API): %w",
			wire.APISubject(endpoint), c.opts.Tenant, endpoint, ErrPermissionDenied)
	}
	subj := c.apiSubject(endpoint)
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: %w", subj, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	var m *nats.Msg
	try := func(ctx context.Context) error {
		var err error
		m, err = c.nc.RequestWithContext(ctx, subj, body)
		if errors.Is(err, nats.ErrNoResponders) {
			if slices.Contains(wire.ReadModelEndpoints(), endpoint) && c.nodeAnswers(ctx) {
				// Nodes run, but only workers: none serves the reads.
				return fmt.Errorf("%s: %w", subj, ErrNoReadModel)
			}
			// Nobody serves the API: no TAH node, not a moment's election.
			return fmt.Errorf("NATS answers at %s, but nothing serves %s: %w", c.URL(), subj, ErrNoNode)
		}
		return err
	}
	// A request the credential may not make gets no answer, only the
	// server's permissions violation: guard ends it with that at once.
	err = c.denials.guard(ctx, subj, func(ctx context.Context) error {
		if repeatable[endpoint] {
			return natsx.Retry(ctx, max(c.opts.RequestTimeout/3, time.Second), try, c.retrying(subj))
		}
		return try(ctx)
	})
	switch {
	case err == nil:
	case errors.Is(err, ErrNoNode), errors.Is(err, ErrNoReadModel), errors.Is(err, context.Canceled), errors.Is(err, ErrPermissionDenied):
		return err
	case natsx.Temporary(err):
		return fmt.Errorf("%s: no answer within %v: %w", subj, c.opts.RequestTimeout, ErrUnavailable)
	default:
		return fmt.Errorf("%s: %w", subj, err)
	}
	if code := m.Header.Get(wire.HeaderServiceErrorCode); code != "" {
		e := &APIError{Endpoint: endpoint, Code: code, Message: m.Header.Get(wire.HeaderServiceError)}
		var q wire.QuotaError
		if code == wire.APIErrQuota && json.Unmarshal(m.Data, &q) == nil && q.Quota != "" {
			e.Quota = &q.QuotaReached
		}
		return e
	}
	if err := json.Unmarshal(m.Data, rep); err != nil {
		return fmt.Errorf("%s: the reply is not a %T (%v): is the node of another version?", subj, rep, err)
	}
	return nil
}

// nodeAnswers reports whether a TAH node answers tah.api.status, which
// every node serves: a read that nobody serves, while one does, means that
// every node is a worker (ErrNoReadModel).
func (c *Client) nodeAnswers(ctx context.Context) bool {
	m, err := c.nc.RequestWithContext(ctx, wire.APISubject(wire.EndpointStatus), []byte("{}"))
	return err == nil && m.Header.Get(wire.HeaderServiceErrorCode) == ""
}
