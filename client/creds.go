package client

import (
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// credsOptions are the connection options of a .creds file: the credential,
// and the inbox prefix its name gives (wire.CredentialInbox: a client, observer,
// admin or tool credential may subscribe under its own prefix only, so that
// no one else receives its replies).
func credsOptions(path string) []nats.Option {
	opts := []nats.Option{nats.UserCredentials(path)}
	if name := credentialName(path); name != "" {
		opts = append(opts, nats.CustomInboxPrefix(wire.CredentialInbox(name)))
	}
	return opts
}

// credentialName is the name in the user JWT of the .creds file at path,
// when it can name an inbox; "" otherwise (the file is then reported by the
// connection, which reads it too).
func credentialName(path string) string {
	uc := userClaims(path)
	if uc == nil || wire.ValidCredentialName(uc.Name) != nil {
		return ""
	}
	return uc.Name
}

// credentialTenant is the tenant the user JWT of the .creds file at path
// was issued for (its tag tenant:<name>), or "".
func credentialTenant(path string) string {
	uc := userClaims(path)
	if uc == nil {
		return ""
	}
	for _, tag := range uc.Tags {
		if t, ok := strings.CutPrefix(tag, wire.TenantTag); ok && event.ValidTenant(t) == nil {
			return t
		}
	}
	return ""
}

// userClaims are the claims of the user JWT of the .creds file at path, or
// nil when it has none that decodes.
func userClaims(path string) *jwt.UserClaims {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return nil
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil
	}
	return uc
}

// Tenant is the tenant whose sessions this Client uses alone (Options.Tenant:
// its credential's), or "" for a credential of every tenant.
func (c *Client) Tenant() string { return c.opts.Tenant }

// apiSubject is the subject of endpoint for this Client: the tenant's API
// for a credential of a tenant.
func (c *Client) apiSubject(endpoint string) string {
	if c.opts.Tenant != "" {
		return wire.TenantAPISubject(c.opts.Tenant, c.opts.Sender, endpoint)
	}
	return wire.APISubject(endpoint)
}
