package auth

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
)

// resolverSync is how often a full resolver compares its accounts with the
// other servers' of a cluster (updates are pushed at once; this catches a
// server that was away).
const resolverSync = time.Minute

// Configure puts opts in operator mode with t: the operator trusted, the
// system account, and a full directory resolver in resolverDir holding the
// system and TAH accounts, so that servers of a cluster share account
// updates (a revocation) over the system account.
func (t *Trust) Configure(opts *server.Options, resolverDir string) error {
	oc, err := jwt.DecodeOperatorClaims(t.operatorJWT)
	if err != nil {
		return fmt.Errorf("operator JWT: %v: %w", err, ErrBadTrust)
	}
	if err := os.MkdirAll(resolverDir, 0o700); err != nil {
		return fmt.Errorf("account resolver: %w", err)
	}
	res, err := server.NewDirAccResolver(resolverDir, 0, resolverSync, server.NoDelete)
	if err != nil {
		return fmt.Errorf("account resolver in %s: %w", resolverDir, err)
	}
	// Stored only when newer than what the resolver has (a revocation pushed
	// by another server of the cluster while this one was away, say).
	for _, account := range []string{t.systemJWT, t.AccountJWT()} {
		claims, err := jwt.DecodeAccountClaims(account)
		if err != nil {
			return fmt.Errorf("account JWT: %v: %w", err, ErrBadTrust)
		}
		if err := res.Store(claims.Subject, account); err != nil {
			return fmt.Errorf("account resolver in %s: %w", resolverDir, err)
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.SystemAccount = t.SystemAccount()
	opts.AccountResolver = res
	return nil
}
