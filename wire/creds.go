package wire

import "time"

// The endpoints of the credentials API, each on APISubject(name) under
// CredsAPIPrefix: only the admin role may call them (RolePermissions). They
// are served by the nodes that embed their NATS server and hold its trust
// material; a node on an external NATS cluster does not serve them (its
// operator issues users with nsc). Errors are the API's (APIErr*).
const (
	EndpointCredsAdd    = "creds.add"
	EndpointCredsList   = "creds.ls"
	EndpointCredsRevoke = "creds.revoke"
	// The tenants, whose credentials the API issues (docs/tenancy.md): a
	// credential of a tenant is issued only once its tenant is added.
	EndpointTenantsAdd    = "creds.tenants.add"
	EndpointTenantsList   = "creds.tenants.ls"
	EndpointTenantsRemove = "creds.tenants.rm"
)

// CredsEndpoints lists the credentials API, in the order of docs/protocol.md.
func CredsEndpoints() []Endpoint {
	return []Endpoint{
		{EndpointCredsAdd, CredsAddRequest{}, CredsAddReply{}},
		{EndpointCredsList, EmptyRequest{}, CredsListReply{}},
		{EndpointCredsRevoke, CredsRevokeRequest{}, CredsRevokeReply{}},
		{EndpointTenantsAdd, TenantRequest{}, TenantAddReply{}},
		{EndpointTenantsList, EmptyRequest{}, TenantsListReply{}},
		{EndpointTenantsRemove, TenantRequest{}, TenantRemoveReply{}},
		{EndpointTenantsSet, TenantSetRequest{}, TenantSetReply{}},
	}
}

// CredsBucket is the KV bucket of the cluster's registry of credentials: a
// Credential under its public key, and the TAH account's JWT under
// CredsAccountKey. Only nodes read or write it.
const CredsBucket = "tah_creds"

// CredsAccountKey is the key of CredsBucket that holds the TAH account's
// newest JWT, the one every revocation is merged into: each version is
// signed after the one it replaces and holds all of its revocations, so
// that servers, which keep the newest, never roll a revocation back.
const CredsAccountKey = "account"

// CredsTenantKeyPrefix starts the keys of CredsBucket that hold a Tenant:
// tenant.<name>.
const CredsTenantKeyPrefix = "tenant."

// Credential is an issued credential: who, what for, and its public key
// (the key of CredsBucket, the name a revocation gives). Never a seed.
type Credential struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Tenant is the tenant whose sessions alone the credential may use
	// (TenantRolePermissions); empty for one of every tenant's.
	Tenant    string    `json:"tenant,omitempty"`
	Tools     []string  `json:"tools,omitempty"`
	PublicKey string    `json:"public_key"`
	Issued    time.Time `json:"issued"`
	// Revoked is read from the account JWT the servers hold.
	Revoked bool `json:"revoked,omitempty"`
}

// CredsAddRequest asks tah.api.creds.add to sign a user JWT of a role for
// a public key: the caller made the key pair and keeps its seed, which
// never travels.
type CredsAddRequest struct {
	// Name names the credential (ValidCredentialName): its JWT's name and
	// its inbox prefix (CredentialInbox).
	Name string `json:"name"`
	// Role is admin, client, tool or observer (never node).
	Role Role `json:"role"`
	// Tenant makes it a credential of that tenant: a client or an observer
	// of its sessions only (TenantRolePermissions, docs/tenancy.md).
	Tenant string `json:"tenant,omitempty"`
	// Tools are the tools a tool credential serves: required for the tool
	// role, refused for the others.
	Tools []string `json:"tools,omitempty"`
	// PublicKey is the user's nkey public key (U...). One already registered
	// is refused (APIErrConflict): generate a new key pair.
	PublicKey string `json:"public_key"`
}

// CredsAddReply is the credential registered and its user JWT, which the
// caller writes with its seed into a .creds file.
type CredsAddReply struct {
	Credential Credential `json:"credential"`
	JWT        string     `json:"jwt"`
}

// CredsListReply lists the registered credentials, oldest first.
type CredsListReply struct {
	Credentials []Credential `json:"credentials"`
}

// CredsRevokeRequest asks tah.api.creds.revoke to revoke every valid
// credential named Name, or the one of PublicKey: give one of the two. None
// to revoke is APIErrNotFound.
type CredsRevokeRequest struct {
	Name      string `json:"name,omitempty"`
	PublicKey string `json:"public_key,omitempty"`
}

// CredsRevokeReply lists the credentials revoked, on every server of the
// cluster, without a restart.
type CredsRevokeReply struct {
	Revoked []Credential `json:"revoked"`
}

// Tenant is a tenant added to the registry of credentials: one whose
// credentials may be issued (CredsAddRequest.Tenant).
type Tenant struct {
	Name  string    `json:"name"`
	Added time.Time `json:"added"`
	// Credentials counts its valid credentials, and Sessions its sessions
	// in the read model (absent where the node has none): in
	// tah.api.creds.tenants.ls only.
	Credentials int  `json:"credentials"`
	Sessions    *int `json:"sessions,omitempty"`
	// Limits are its quotas (TenantLimits; absent: none), Usage what it
	// used of them: in tah.api.creds.tenants.ls and set only.
	Limits TenantLimits `json:"limits,omitzero"`
	Usage  *TenantUsage `json:"usage,omitempty"`
}

// TenantRequest names the tenant to add (tah.api.creds.tenants.add) or to
// remove (tah.api.creds.tenants.rm).
type TenantRequest struct {
	Name string `json:"name"`
}

// TenantAddReply is the tenant added.
type TenantAddReply struct {
	Tenant Tenant `json:"tenant"`
}

// TenantsListReply lists the tenants added, by name.
type TenantsListReply struct {
	Tenants []Tenant `json:"tenants"`
}

// TenantRemoveReply is the tenant removed and the credentials of it that
// the removal revoked. Its sessions stay.
type TenantRemoveReply struct {
	Tenant  Tenant       `json:"tenant"`
	Revoked []Credential `json:"revoked"`
}
