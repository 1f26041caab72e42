package client

import (
	"os"
	"slices"
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

// namesInputs reports whether the .creds file at path may publish the
// inputs of the default tenant's sessions named by sender
// (tah.sess.<sid>.in.by.<sender>): a credential issued before inputs named
// their sender allows only the unnamed form, which a client of it keeps to.
// A file that does not decode says yes (the connection reports it).
func namesInputs(path, sender string) bool {
	uc := userClaims(path)
	if uc == nil || len(uc.Pub.Allow) == 0 {
		return true
	}
	return slices.Contains(uc.Pub.Allow, wire.NamedInputSubjectsOf(sender)) || slices.Contains(uc.Pub.Allow, ">")
}

// inputSender is the sender token of this Client's inputs to session sid
// (wire.InputSubject): its name (wire.AnonymousSender without a
// credential), but none ("") to the default tenant's sessions where its
// credential may not name it, or where the server refused $anon.
func (c *Client) inputSender(sid string) string {
	if (c.unnamedInputs || c.opts.Sender == wire.AnonymousSender && c.anonUnnamed.Load()) && event.TenantOf(sid) == "" {
		return ""
	}
	return c.opts.Sender
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
// for a credential of a tenant; a command's, naming the credential, where
// it may (wire.NamedAPISubject).
func (c *Client) apiSubject(endpoint string) string {
	if c.opts.Tenant != "" {
		return wire.TenantAPISubject(c.opts.Tenant, c.opts.Sender, endpoint)
	}
	if slices.Contains(wire.CommandEndpoints(), endpoint) && !c.unnamedInputs && wire.ValidCredentialName(c.opts.Sender) == nil {
		return wire.NamedAPISubject(endpoint, c.opts.Sender)
	}
	return wire.APISubject(endpoint)
}
