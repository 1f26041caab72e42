package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
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
	uc := jwt.NewUserClaims(pub)
	uc.Name = u.Name
	uc.IssuerAccount = t.Account()
	uc.Permissions = u.Permissions
	uc.Tags.Add(u.Tags...)
	token, err := uc.Encode(t.signer)
	if err != nil {
		return Issued{}, fmt.Errorf("sign the user %s: %w", u.Name, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return Issued{}, err
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return Issued{}, err
	}
	return Issued{Creds: creds, PublicKey: pub, IssuedAt: time.Unix(uc.IssuedAt, 0).UTC()}, nil
}

// ensureLocalCreds issues the node's and the local admin's credentials
// into the data directory when they are missing.
func (t *Trust) ensureLocalCreds() error {
	for _, c := range []struct {
		path string
		user User
	}{
		{NodeCredsPath(t.dataDir), NodeUser()},
		{AdminCredsPath(t.dataDir), AdminUser()},
	} {
		if _, err := os.Stat(c.path); err == nil {
			continue
		}
		issued, err := t.Issue(c.user)
		if err != nil {
			return err
		}
		if err := writeSecret(c.path, issued.Creds); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("credentials %s: %w", c.path, err)
		}
	}
	return nil
}

// NodeUser is the node's own user: everything TAH itself does.
func NodeUser() User { return User{Name: "node", Tags: []string{"role:node"}} }

// AdminUser is the local admin's user.
func AdminUser() User { return User{Name: "admin", Tags: []string{"role:admin"}} }
