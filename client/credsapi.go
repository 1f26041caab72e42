package client

import (
	"context"
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/wire"
)

// The credentials API (docs/protocol.md, "Credentials API"): only an admin
// credential may call it, and only a node that embeds its NATS server
// serves it (ErrNoNode otherwise: on an external cluster, its operator
// issues users with nsc). Errors are the API's (*APIError).

// IssueCreds issues a credential of role named name (tools: the tools a
// tool credential serves) and returns its .creds file, a secret to write
// with mode 0600. The user's key pair is made here: a node signs a user JWT
// for its public key, and the seed never leaves this process.
func (c *Client) IssueCreds(ctx context.Context, name string, role wire.Role, tools []string) ([]byte, wire.Credential, error) {
	return c.issue(ctx, wire.CredsAddRequest{Name: name, Role: role, Tools: tools})
}

// IssueTenantCreds is IssueCreds of a credential of tenant: a client or an
// observer of that tenant's sessions only, or a tool serving the tenant's
// tools named in tools to them (wire.TenantRolePermissions).
func (c *Client) IssueTenantCreds(ctx context.Context, tenant, name string, role wire.Role, tools ...string) ([]byte, wire.Credential, error) {
	return c.issue(ctx, wire.CredsAddRequest{Name: name, Role: role, Tenant: tenant, Tools: tools})
}

// issue makes a user key pair, has req signed for its public key, and
// returns the .creds file of both.
func (c *Client) issue(ctx context.Context, req wire.CredsAddRequest) ([]byte, wire.Credential, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, wire.Credential{}, fmt.Errorf("a user key pair: %w", err)
	}
	pub, _ := kp.PublicKey()
	req.PublicKey = pub
	rep, err := request[wire.CredsAddReply](ctx, c, wire.EndpointCredsAdd, req)
	if err != nil {
		return nil, wire.Credential{}, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, wire.Credential{}, err
	}
	creds, err := jwt.FormatUserConfig(rep.JWT, seed)
	if err != nil {
		return nil, wire.Credential{}, fmt.Errorf("the node's user JWT: %w", err)
	}
	return creds, rep.Credential, nil
}

// ListCreds lists the credentials issued in the cluster, oldest first.
func (c *Client) ListCreds(ctx context.Context) ([]wire.Credential, error) {
	rep, err := request[wire.CredsListReply](ctx, c, wire.EndpointCredsList, wire.EmptyRequest{})
	return rep.Credentials, err
}

// RevokeCreds revokes every valid credential named req.Name, or the one of
// req.PublicKey, on every server at once, and returns them.
func (c *Client) RevokeCreds(ctx context.Context, req wire.CredsRevokeRequest) ([]wire.Credential, error) {
	rep, err := request[wire.CredsRevokeReply](ctx, c, wire.EndpointCredsRevoke, req)
	return rep.Revoked, err
}

// AddTenant adds tenant name, whose credentials may then be issued
// (IssueTenantCreds). One added already is ErrConflict.
func (c *Client) AddTenant(ctx context.Context, name string) (wire.Tenant, error) {
	rep, err := request[wire.TenantAddReply](ctx, c, wire.EndpointTenantsAdd, wire.TenantRequest{Name: name})
	return rep.Tenant, err
}

// Tenants lists the tenants added, by name, with their valid credentials
// and sessions counted.
func (c *Client) Tenants(ctx context.Context) ([]wire.Tenant, error) {
	rep, err := request[wire.TenantsListReply](ctx, c, wire.EndpointTenantsList, wire.EmptyRequest{})
	return rep.Tenants, err
}

// SetTenantLimits changes a tenant's quotas as req says (a field absent is
// left as it is, a negative one removes the limit) and returns the tenant
// with its limits and usage. A tenant not added is ErrNotFound.
func (c *Client) SetTenantLimits(ctx context.Context, req wire.TenantSetRequest) (wire.Tenant, error) {
	rep, err := request[wire.TenantSetReply](ctx, c, wire.EndpointTenantsSet, req)
	return rep.Tenant, err
}

// RemoveTenant revokes the valid credentials of tenant name, on every
// server at once, and removes it; its sessions stay. A tenant not added is
// ErrNotFound.
func (c *Client) RemoveTenant(ctx context.Context, name string) (wire.TenantRemoveReply, error) {
	return request[wire.TenantRemoveReply](ctx, c, wire.EndpointTenantsRemove, wire.TenantRequest{Name: name})
}
