package auth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/internal/localnode"
)

// Errors of the trust material.
var (
	// ErrNoTrust: the data directory holds no trust material (or a part of it
	// is missing).
	ErrNoTrust = errors.New("no trust material")
	// ErrBadTrust: the trust material is there but does not hold together (a
	// seed that does not match its JWT, a JWT that does not decode).
	ErrBadTrust = errors.New("trust material is damaged")
	// ErrTrustExists: CopyTrust into a data directory that has its own.
	ErrTrustExists = errors.New("the data directory has trust material already")
	// ErrBadPublicKey: a key to issue a credential for, or to revoke, that is
	// not a user's nkey public key (U followed by 55 characters).
	ErrBadPublicKey = errors.New("not a user's public key")
	// ErrForeignAccount: an account JWT to merge that is not the TAH
	// account's, or not signed by this trust's operator.
	ErrForeignAccount = errors.New("not this trust's account JWT")
)

// The names the material gives its operator and accounts.
const (
	OperatorName = "TAH"
	SystemName   = "SYS"
	AccountName  = "TAH"
)

// Trust is the trust material of a data directory: the keys that sign the
// TAH account and its users. It is safe for concurrent use.
type Trust struct {
	dataDir string

	operator    nkeys.KeyPair
	operatorJWT string
	system      nkeys.KeyPair
	systemJWT   string
	account     nkeys.KeyPair
	signer      nkeys.KeyPair

	mu         sync.Mutex
	accountJWT string // the newest known: merged, re-signed on every revocation
}

// Ensure returns the trust material of dataDir, generating it at first start
// (<dataDir>/trust, mode 0700, its seeds 0600), and writes the node's and the
// local admin's credentials (node.creds, admin.creds, 0600) when they are
// missing. A second node of a cluster starts with a copy of the first's
// <dataDir>/trust and issues its own credentials from it.
func Ensure(dataDir string) (*Trust, error) {
	if err := localnode.MakeDir(dataDir); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	t, err := Load(dataDir)
	if errors.Is(err, ErrNoTrust) {
		if _, serr := os.Stat(filepath.Join(dataDir, TrustDir)); serr == nil {
			// Another start has just renamed its material into place, or a
			// part of it is missing: never generate over it.
			t, err = Load(dataDir)
		} else {
			t, err = generate(dataDir)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := t.ensureLocalCreds(); err != nil {
		return nil, err
	}
	if err := t.ensureSystemExport(context.Background()); err != nil {
		return nil, err
	}
	return t, nil
}

// Load reads the trust material of dataDir; ErrNoTrust when there is none.
func Load(dataDir string) (*Trust, error) {
	dir := filepath.Join(dataDir, TrustDir)
	t := &Trust{dataDir: dataDir}
	var err error
	if t.operator, t.operatorJWT, err = loadPair(dir, operatorSeedFile, operatorJWTFile); err != nil {
		return nil, err
	}
	if t.system, t.systemJWT, err = loadPair(dir, systemSeedFile, systemJWTFile); err != nil {
		return nil, err
	}
	if t.account, t.accountJWT, err = loadPair(dir, accountSeedFile, accountJWTFile); err != nil {
		return nil, err
	}
	if t.signer, err = loadSeed(dir, signingSeedFile); err != nil {
		return nil, err
	}
	ac, err := jwt.DecodeAccountClaims(t.accountJWT)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", filepath.Join(dir, accountJWTFile), err, ErrBadTrust)
	}
	if signer, _ := t.signer.PublicKey(); !ac.SigningKeys.Contains(signer) {
		return nil, fmt.Errorf("%s: the signing key is not the account's: %w", filepath.Join(dir, signingSeedFile), ErrBadTrust)
	}
	return t, nil
}

// loadSeed reads a seed file.
func loadSeed(dir, name string) (nkeys.KeyPair, error) {
	b, err := readFile(dir, name)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", filepath.Join(dir, name), err, ErrBadTrust)
	}
	return kp, nil
}

// loadPair reads a seed and the JWT of its public key.
func loadPair(dir, seedName, jwtName string) (nkeys.KeyPair, string, error) {
	kp, err := loadSeed(dir, seedName)
	if err != nil {
		return nil, "", err
	}
	b, err := readFile(dir, jwtName)
	if err != nil {
		return nil, "", err
	}
	claims, err := jwt.Decode(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v: %w", filepath.Join(dir, jwtName), err, ErrBadTrust)
	}
	if pub, _ := kp.PublicKey(); claims.Claims().Subject != pub {
		return nil, "", fmt.Errorf("%s does not belong to %s: %w", filepath.Join(dir, jwtName), filepath.Join(dir, seedName), ErrBadTrust)
	}
	return kp, string(b), nil
}

// generate makes new trust material in a directory of its own and renames it
// into place, so that two nodes starting at once on one data directory end
// with one material: the loser reads the winner's.
func generate(dataDir string) (*Trust, error) {
	tmp, err := os.MkdirTemp(dataDir, ".trust-*")
	if err != nil {
		return nil, fmt.Errorf("trust material: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := writeNew(tmp); err != nil {
		return nil, fmt.Errorf("trust material: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, TrustDir)); err != nil {
		if !errors.Is(err, fs.ErrExist) && !errors.Is(err, errNotEmpty) {
			return nil, fmt.Errorf("trust material: %w", err)
		}
	}
	return Load(dataDir)
}

// writeNew writes an operator, a system account, the TAH account and its
// signing key into dir.
func writeNew(dir string) error {
	operator, err := nkeys.CreateOperator()
	if err != nil {
		return err
	}
	system, err := nkeys.CreateAccount()
	if err != nil {
		return err
	}
	account, err := nkeys.CreateAccount()
	if err != nil {
		return err
	}
	signer, err := nkeys.CreateAccount()
	if err != nil {
		return err
	}
	opPub, _ := operator.PublicKey()
	sysPub, _ := system.PublicKey()
	accPub, _ := account.PublicKey()
	signerPub, _ := signer.PublicKey()

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = OperatorName
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(operator)
	if err != nil {
		return err
	}
	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = SystemName
	sc.Exports.Add(disconnectExport())
	sysJWT, err := sc.Encode(operator)
	if err != nil {
		return err
	}
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = AccountName
	ac.SigningKeys.Add(signerPub)
	ac.Imports.Add(disconnectImport(accPub, sysPub))
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
	}
	accJWT, err := ac.Encode(operator)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		kp   nkeys.KeyPair
		text string
	}{
		{operatorSeedFile, operator, ""}, {operatorJWTFile, nil, opJWT},
		{systemSeedFile, system, ""}, {systemJWTFile, nil, sysJWT},
		{accountSeedFile, account, ""}, {accountJWTFile, nil, accJWT},
		{signingSeedFile, signer, ""},
	}
	for _, f := range files {
		b := []byte(f.text)
		if f.kp != nil {
			if b, err = f.kp.Seed(); err != nil {
				return err
			}
		}
		if err := writeSecret(filepath.Join(dir, f.name), b); err != nil {
			return err
		}
	}
	return nil
}

// OperatorKey is the operator's public key.
func (t *Trust) OperatorKey() string { k, _ := t.operator.PublicKey(); return k }

// SystemAccount is the system account's public key.
func (t *Trust) SystemAccount() string { k, _ := t.system.PublicKey(); return k }

// Account is the TAH account's public key: JetStream stores its streams
// under <store>/jetstream/<Account>.
func (t *Trust) Account() string { k, _ := t.account.PublicKey(); return k }

// OperatorJWT is the operator's JWT, which servers trust.
func (t *Trust) OperatorJWT() string { return t.operatorJWT }

// SystemJWT is the system account's JWT.
func (t *Trust) SystemJWT() string { return t.systemJWT }

// AccountJWT is the TAH account's current JWT.
func (t *Trust) AccountJWT() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accountJWT
}
