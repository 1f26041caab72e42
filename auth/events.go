package auth

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/tah-dev/tah/wire"
)

// disconnectsName names the export and the import of the disconnect
// advisories in the account JWTs.
const disconnectsName = "tah-disconnects"

// The nodes learn that another node's connection closed from the servers'
// disconnect advisories (wire.DisconnectAdvisories), which the servers
// publish in the system account only. The system account exports them, each
// account only its own (the account token position), and the TAH account
// imports its own under the same subject: a node's connection, which may
// subscribe to everything, then receives them; no other role's credential
// may subscribe to $SYS subjects.

// disconnectExport is the system account's export of every account's
// disconnect advisories, each to that account alone.
func disconnectExport() *jwt.Export {
	return &jwt.Export{Name: disconnectsName, Subject: jwt.Subject(wire.DisconnectAdvisories), Type: jwt.Stream,
		AccountTokenPosition: wire.DisconnectAdvisoryAccountToken}
}

// disconnectImport is the TAH account's (account) import of its own
// disconnect advisories from the system account (system).
func disconnectImport(account, system string) *jwt.Import {
	return &jwt.Import{Name: disconnectsName, Subject: jwt.Subject(wire.DisconnectAdvisory(account)), Account: system, Type: jwt.Stream}
}

func hasDisconnectExport(sc *jwt.AccountClaims) bool {
	for _, e := range sc.Exports {
		if e.IsStream() && string(e.Subject) == wire.DisconnectAdvisories && e.AccountTokenPosition == wire.DisconnectAdvisoryAccountToken {
			return true
		}
	}
	return false
}

func hasDisconnectImport(ac *jwt.AccountClaims, system string) bool {
	for _, i := range ac.Imports {
		if i.IsStream() && i.Account == system && string(i.Subject) == wire.DisconnectAdvisory(ac.Subject) && i.LocalSubject == "" {
			return true
		}
	}
	return false
}

// withDisconnectImport adds the import of the disconnect advisories to ac
// when it lacks it.
func (t *Trust) withDisconnectImport(ac *jwt.AccountClaims) {
	if !hasDisconnectImport(ac, t.SystemAccount()) {
		ac.Imports.Add(disconnectImport(ac.Subject, t.SystemAccount()))
	}
}

// ensureSystemExport gives trust material made before the disconnect
// advisories were exported a system account JWT that exports them, signed a
// second after the old one (a server keeps the later) and kept in
// trust/system.jwt. (The TAH account's import comes with its next signature:
// Merge signs one when the newest lacks it.)
func (t *Trust) ensureSystemExport(ctx context.Context) error {
	sc, err := jwt.DecodeAccountClaims(t.systemJWT)
	if err != nil {
		return fmt.Errorf("system account JWT: %v: %w", err, ErrBadTrust)
	}
	if hasDisconnectExport(sc) {
		return nil
	}
	if wait := time.Until(time.Unix(sc.IssuedAt+1, 0)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("export the disconnect advisories: %w", ctx.Err())
		}
	}
	sc.Exports.Add(disconnectExport())
	token, err := sc.Encode(t.operator)
	if err != nil {
		return fmt.Errorf("export the disconnect advisories: %w", err)
	}
	if err := replaceSecret(filepath.Join(t.dataDir, TrustDir, systemJWTFile), []byte(token)); err != nil {
		return fmt.Errorf("export the disconnect advisories: %w", err)
	}
	t.systemJWT = token
	return nil
}
