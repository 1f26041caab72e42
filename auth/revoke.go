package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Revoke revokes the users of the public keys pubs (every JWT issued to
// them until now) and returns the TAH account's new JWT: the account's
// revocations merged from the trust's own JWT and others (the same
// account's JWTs held elsewhere: the cluster's registry, a server's
// resolver; empty ones are skipped), the new ones added, signed after every
// one of them, so that a server, which keeps the newest, never rolls a
// revocation back. The trust keeps it (trust/tah.jwt), where a server finds
// it at its next start; Push hands it to running servers.
func (t *Trust) Revoke(ctx context.Context, pubs []string, others ...string) (string, error) {
	for _, pub := range pubs {
		if !nkeys.IsValidPublicUserKey(pub) {
			return "", fmt.Errorf("revoke %q: %w", pub, ErrBadPublicKey)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m, err := t.merged(others)
	if err != nil {
		return "", err
	}
	// A second later than any JWT issued so far: the server compares issue
	// times in seconds.
	at := time.Now().Add(time.Second)
	for _, pub := range pubs {
		m.revocations[pub] = max(m.revocations[pub], at.Unix())
	}
	return t.sign(ctx, m)
}

// Merge returns the TAH account's JWT that holds the revocations of the
// trust's own and of others (see Revoke): the newest of them when it holds
// them all (and imports the disconnect advisories: see events.go), else a
// new one signed after all of them. The trust keeps it.
func (t *Trust) Merge(ctx context.Context, others ...string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, err := t.merged(others)
	if err != nil {
		return "", err
	}
	if maps.Equal(m.revocations, m.newest.Revocations) && hasDisconnectImport(m.newest, t.SystemAccount()) {
		return m.newestJWT, t.keep(m.newestJWT)
	}
	return t.sign(ctx, m)
}

// merge is the union of account JWTs: their revocations (the latest time of
// each key), the newest of them and its issue time.
type merge struct {
	revocations jwt.RevocationList
	newest      *jwt.AccountClaims
	newestJWT   string
}

// merged merges the trust's JWT and others, which must be the same
// account's, signed by the trust's operator (ErrForeignAccount).
func (t *Trust) merged(others []string) (merge, error) {
	m := merge{revocations: jwt.RevocationList{}}
	for _, token := range append([]string{t.accountJWT}, others...) {
		if token == "" {
			continue
		}
		ac, err := jwt.DecodeAccountClaims(token)
		if err != nil {
			return merge{}, fmt.Errorf("account JWT: %v: %w", err, ErrForeignAccount)
		}
		if ac.Subject != t.Account() || ac.Issuer != t.OperatorKey() {
			return merge{}, fmt.Errorf("account JWT of %s issued by %s: %w", ac.Subject, ac.Issuer, ErrForeignAccount)
		}
		for pub, at := range ac.Revocations {
			m.revocations[pub] = max(m.revocations[pub], at)
		}
		if m.newest == nil || ac.IssuedAt > m.newest.IssuedAt {
			m.newest, m.newestJWT = ac, token
		}
	}
	return m, nil
}

// sign signs the newest of m with m's revocations, in a second after its
// issue time (waiting for it when it is this second's), and keeps it.
func (t *Trust) sign(ctx context.Context, m merge) (string, error) {
	if wait := time.Until(time.Unix(m.newest.IssuedAt+1, 0)); wait > 0 {
		// A server keeps the JWT of the later issue time, in seconds: the
		// new one must be later than every one it merges.
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return "", fmt.Errorf("sign the account's revocations: %w", ctx.Err())
		}
	}
	ac := m.newest
	ac.Revocations = m.revocations
	t.withDisconnectImport(ac)
	token, err := ac.Encode(t.operator)
	if err != nil {
		return "", fmt.Errorf("sign the account's revocations: %w", err)
	}
	return token, t.keep(token)
}

// keep makes token the trust's account JWT, in memory and in trust/tah.jwt.
// The caller holds t.mu.
func (t *Trust) keep(token string) error {
	if token == t.accountJWT {
		return nil
	}
	if err := replaceSecret(filepath.Join(t.dataDir, TrustDir, accountJWTFile), []byte(token)); err != nil {
		return fmt.Errorf("keep the account's revocations: %w", err)
	}
	t.accountJWT = token
	return nil
}

// Revoked reports whether the JWT issued to the user of public key pub at
// issued is revoked by the account JWT accountJWT (false when it does not
// decode).
func Revoked(accountJWT, pub string, issued time.Time) bool {
	ac, err := jwt.DecodeAccountClaims(accountJWT)
	return err == nil && ac.Revocations.IsRevoked(pub, issued)
}

// Push hands the TAH account's current JWT to the running server at url
// (any server of a cluster: a full resolver passes it on to the others
// over the system account), as a user of the system account; the server
// applies it at once, closing the connections of revoked users.
// opts are the connection's further options (nats.InProcessServer for a
// node's own server, TLS).
func (t *Trust) Push(ctx context.Context, url string, opts ...nats.Option) error {
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
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserJWTAndSeed(token, string(seed)), nats.Name("tah account update")}, opts...)...)
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
