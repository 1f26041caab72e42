package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/tah-dev/tah/wire"
)

// User is a credential to issue: who, and what NATS lets them do.
type User struct {
	// Name is the user's name in its JWT (and the server's monitoring).
	Name string
	// Permissions are the publish and subscribe allow and deny lists; empty
	// allows everything (the node's own credential).
	Permissions jwt.Permissions
	// Tags are the user JWT's tags (the role, and a tool's names).
	Tags []string
}

// Issued is a credential just issued: its .creds file and its public key
// (the name a revocation gives).
type Issued struct {
	Creds     []byte
	PublicKey string
	IssuedAt  time.Time
}

// Issue signs a new user of the TAH account with the account's signing key
// and returns its .creds file (its JWT and seed: a secret, to write 0600).
func (t *Trust) Issue(u User) (Issued, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Issued{}, err
	}
	pub, _ := kp.PublicKey()
	token, issuedAt, err := t.IssueFor(u, pub)
	if err != nil {
		return Issued{}, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return Issued{}, err
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return Issued{}, err
	}
	return Issued{Creds: creds, PublicKey: pub, IssuedAt: issuedAt}, nil
}

// IssueFor signs the user JWT of u for the public key pub, whose seed the
// caller keeps (it never reaches the signer): how a node issues a
// credential for an admin on another machine. ErrBadPublicKey when pub is
// not a user's public key.
func (t *Trust) IssueFor(u User, pub string) (token string, issuedAt time.Time, err error) {
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", time.Time{}, fmt.Errorf("%q: %w", pub, ErrBadPublicKey)
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = u.Name
	uc.IssuerAccount = t.Account()
	uc.Permissions = u.Permissions
	uc.Tags.Add(u.Tags...)
	if token, err = uc.Encode(t.signer); err != nil {
		return "", time.Time{}, fmt.Errorf("sign the user %s: %w", u.Name, err)
	}
	return token, time.Unix(uc.IssuedAt, 0).UTC(), nil
}

// ensureLocalCreds issues the node's (role node) and the local admin's
// (role admin) credentials into the data directory when they are missing.
func (t *Trust) ensureLocalCreds() error {
	if err := t.EnsureCreds(NodeCredsPath(t.dataDir), wire.RoleNode, string(wire.RoleNode)); err != nil {
		return err
	}
	return t.EnsureCreds(AdminCredsPath(t.dataDir), wire.RoleAdmin, string(wire.RoleAdmin))
}

// UICredsPath is <dataDir>/ui.creds, the credential (role client) the
// node's web UI (package inspector) connects with.
func UICredsPath(dataDir string) string { return filepath.Join(dataDir, "ui.creds") }

// EnsureCreds issues a credential of role named name into the file path
// (mode 0600) when there is none yet; a file written meanwhile by another
// process is kept. A credential of this trust there already whose
// permissions are not the role's of this build (issued by an older one: a
// role that gained subjects since, as a tenant's inputs) is issued again in
// its place, atomically: the older one stays valid, with what it allowed.
func (t *Trust) EnsureCreds(path string, role wire.Role, name string) error {
	u, err := RoleUser(role, name, nil)
	if err != nil {
		return err
	}
	return t.EnsureUserCreds(path, u)
}

// EnsureUserCreds is EnsureCreds of user u (a tenant's, say: TenantUser).
func (t *Trust) EnsureUserCreds(path string, u User) error {
	b, err := os.ReadFile(path)
	if err == nil && !t.outdated(b, u) {
		return nil
	}
	issued, err := t.Issue(u)
	if err != nil {
		return err
	}
	if b != nil {
		if err := replaceSecret(path, issued.Creds); err != nil {
			return fmt.Errorf("credentials %s: %w", path, err)
		}
		return nil
	}
	if err := writeSecret(path, issued.Creds); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("credentials %s: %w", path, err)
	}
	return nil
}

// outdated reports whether creds is a credential of this trust's account,
// named as u, whose permissions are not u's. Anything else (a file that is
// not a credential, another account's) is not replaced.
func (t *Trust) outdated(creds []byte, u User) bool {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return false
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil || uc.IssuerAccount != t.Account() || uc.Name != u.Name {
		return false
	}
	return !reflect.DeepEqual(uc.Permissions, u.Permissions)
}

// RoleUser is the user of a credential named name with role's permissions
// (wire.RolePermissions: tools are a tool credential's tool names), tagged
// with its role and tools so that its JWT says what it is.
func RoleUser(role wire.Role, name string, tools []string) (User, error) {
	p, err := wire.RolePermissions(role, name, tools)
	if err != nil {
		return User{}, err
	}
	tags := []string{RoleTag + string(role)}
	for _, t := range tools {
		tags = append(tags, ToolTag+t)
	}
	return User{Name: name, Permissions: JWTPermissions(p), Tags: tags}, nil
}

// The prefixes of a user JWT's tags (wire's: clients read them too).
const (
	RoleTag   = wire.RoleTag
	ToolTag   = wire.ToolTag
	TenantTag = wire.TenantTag
)

// TenantUser is the user of a credential named name of tenant with role's
// permissions there (wire.TenantRolePermissions: a client, an observer, or
// a tool serving the tenant's tools named in tools), tagged with its role,
// its tenant and its tools.
func TenantUser(tenant string, role wire.Role, name string, tools []string) (User, error) {
	p, err := wire.TenantRolePermissions(tenant, role, name, tools)
	if err != nil {
		return User{}, err
	}
	tags := []string{RoleTag + string(role), TenantTag + tenant}
	for _, t := range tools {
		tags = append(tags, ToolTag+t)
	}
	return User{Name: name, Permissions: JWTPermissions(p), Tags: tags}, nil
}

// responseWindow is how long a tool may take to answer a request it
// received (the reply permission of AllowResponses): longer than any tool's
// time limit.
const responseWindow = time.Hour

// JWTPermissions turns wire's permissions into a user JWT's.
func JWTPermissions(p wire.Permissions) jwt.Permissions {
	out := jwt.Permissions{
		Pub: jwt.Permission{Allow: p.PublishAllow, Deny: p.PublishDeny},
		Sub: jwt.Permission{Allow: p.SubscribeAllow, Deny: p.SubscribeDeny},
	}
	if p.AllowResponses {
		// No count: the server counts a request delivered to several
		// subscriptions of one connection (a discovery request to each of a
		// tool service's services) against the replies, so a count would
		// refuse the later services' answers.
		out.Resp = &jwt.ResponsePermission{MaxMsgs: -1, Expires: responseWindow}
	}
	return out
}
