package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// addTenantEndpoints serves the tenants' API (docs/tenancy.md): each of
// wire.TenantEndpoints on tah.tapi.*.*.<endpoint>, answered by the same
// handler as tah.api.<endpoint>, given a request confined to the tenant
// its subject names (tenantScoped). A tenant's credential may publish
// there with its own tenant and name only (wire.TenantRolePermissions), so
// the subject says whose request it is; the server enforces that.
func addTenantEndpoints(svc micro.Service, handlers map[string]micro.Handler) error {
	for _, name := range wire.TenantEndpoints() {
		h, ok := handlers[name]
		if !ok {
			continue // not served here (a worker's read-model endpoints)
		}
		if err := svc.AddEndpoint("tenant-"+name, tenantHandler(h), micro.WithEndpointSubject(wire.TenantAPIEndpointSubject(name))); err != nil {
			return fmt.Errorf("api endpoint %s: %w", wire.TenantAPIEndpointSubject(name), err)
		}
	}
	return nil
}

// tenantHandler answers a tenant's request with h, its body confined to the
// tenant (tenantScoped); a request that reaches outside it is refused as
// its session not found, which is what it is for the tenant.
func tenantHandler(h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		if wire.CheckReplySubject(r.Reply()) != nil {
			return // as endpoint does: never a reply onto a subject no client owns
		}
		tenant, cred, name, ok := wire.TenantOfAPISubject(r.Subject())
		if !ok {
			r.Error(wire.APIErrBadRequest, "not a tenant's API subject (tah.tapi.<tenant>.<credential>.<endpoint>): "+r.Subject(), nil)
			return
		}
		data, err := tenantScoped(name, tenant, cred, r.Data())
		if err != nil {
			code := wire.APIErrBadRequest
			var ae *apiError
			if errors.As(err, &ae) {
				code = ae.code
			}
			r.Error(code, err.Error(), nil)
			return
		}
		h.Handle(scopedRequest{Request: r, data: data})
	})
}

// scopedRequest is a request with another body.
type scopedRequest struct {
	micro.Request
	data []byte
}

func (r scopedRequest) Data() []byte { return r.data }

// tenantScoped returns the body of a request of endpoint by credential cred
// of tenant, confined to the tenant: create makes a session of the tenant,
// list lists the tenant's, tools the tools its sessions are offered, any
// other names a session of the tenant's (else
// it is not found, as for an unknown session: a tenant learns nothing of
// another's). A decision's and a budget change's by is the credential's
// name, and a command's reply_to must be under the credential's own inbox.
func tenantScoped(endpoint, tenant, cred string, data []byte) ([]byte, error) {
	req := map[string]json.RawMessage{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, fmt.Errorf("the request is not the JSON object of %s: %v", wire.APISubject(endpoint), err)
		}
	}
	// encoding/json matches a struct's fields whatever their case: a
	// "Session" beside the "session" checked here would reach the handler.
	for k := range req {
		for _, f := range []string{"session", "tenant", "by", "reply_to"} {
			if k != f && strings.EqualFold(k, f) {
				return nil, fmt.Errorf("field %q: write it %q", k, f)
			}
		}
	}
	str := func(v string) json.RawMessage { b, _ := json.Marshal(v); return b }
	field := func(k string) (string, error) {
		raw, ok := req[k]
		if !ok {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%s: not a string", k)
		}
		return s, nil
	}
	switch endpoint {
	case wire.EndpointCreate:
		if t, err := field("tenant"); err != nil || (t != "" && t != tenant) {
			return nil, fmt.Errorf("tenant: a credential of tenant %s creates sessions of its own tenant only", tenant)
		}
		req["tenant"] = str(tenant)
	case wire.EndpointList, wire.EndpointTools:
		req["tenant"] = str(tenant)
	default:
		sid, err := field("session")
		if err != nil {
			return nil, err
		}
		if sid == "" {
			return nil, fmt.Errorf("no session given")
		}
		if event.ValidSessionID(sid) != nil || event.TenantOf(sid) != tenant {
			return nil, &apiError{wire.APIErrNotFound, fmt.Errorf("session %s not found (tenant %s's sessions are %s.<id>)", sid, tenant, tenant)}
		}
	}
	switch endpoint {
	case wire.EndpointApprove, wire.EndpointDeny, wire.EndpointBudget:
		req["by"] = str(cred)
	}
	if to, err := field("reply_to"); err != nil || (to != "" && !strings.HasPrefix(to, wire.CredentialInbox(cred)+".")) {
		return nil, fmt.Errorf("reply_to must be a subject under the credential's own inbox (%s.<token>)", wire.CredentialInbox(cred))
	}
	return json.Marshal(req)
}
