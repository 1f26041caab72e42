package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Revoke revokes the user of public key pub (every JWT issued to it until
// now): the TAH account's JWT is signed again with the revocation and kept
// in the trust material, where a server finds it at its next start. Push
// hands it to running servers.
func (t *Trust) Revoke(pub string) (string, error) {
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("%q is not a user's public key: %w", pub, ErrBadTrust)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ac, err := jwt.DecodeAccountClaims(t.accountJWT)
	if err != nil {
		return "", fmt.Errorf("account JWT: %v: %w", err, ErrBadTrust)
	}
	// A second later than any JWT issued so far: the server compares issue
	// times in seconds.
	ac.RevokeAt(pub, time.Now().Add(time.Second))
	token, err := ac.Encode(t.operator)
	if err != nil {
		return "", err
	}
	if err := replaceSecret(filepath.Join(t.dataDir, TrustDir, accountJWTFile), []byte(token)); err != nil {
		return "", fmt.Errorf("keep the revocation: %w", err)
	}
	t.accountJWT = token
	return token, nil
}

// Revoked reports whether the JWT issued to the user of public key pub at
// issued is revoked.
func (t *Trust) Revoked(pub string, issued time.Time) bool {
	ac, err := jwt.DecodeAccountClaims(t.AccountJWT())
	return err == nil && ac.Revocations.IsRevoked(pub, issued)
}

// Push hands the TAH account's current JWT to the running server at url
// (any server of a cluster: a full resolver passes it on to the others
// over the system account), as a user of the system account; the server
// applies it at once, closing the connections of revoked users.
func (t *Trust) Push(ctx context.Context, url string) error {
	user, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "tah-account-update"
	uc.Expires = time.Now().Add(time.Minute).Unix()
	token, err := uc.Encode(t.system)
	if err != nil {
		return err
	}
	seed, _ := user.Seed()
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(token, string(seed)), nats.Name("tah account update"))
	if err != nil {
		return fmt.Errorf("connect to %s as the system account: %w", url, err)
	}
	defer nc.Close()
	subj := fmt.Sprintf("$SYS.REQ.ACCOUNT.%s.CLAIMS.UPDATE", t.Account())
	reply, err := nc.RequestWithContext(ctx, subj, []byte(t.AccountJWT()))
	if err != nil {
		return fmt.Errorf("update the TAH account on %s: %w", url, err)
	}
	var r struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		return fmt.Errorf("update the TAH account on %s: %s", url, reply.Data)
	}
	if r.Error != nil {
		return fmt.Errorf("update the TAH account on %s: %d %s", url, r.Error.Code, r.Error.Description)
	}
	return nil
}
