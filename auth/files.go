package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tah-dev/tah/internal/localnode"
)

// The files of a data directory's trust material.
const (
	// TrustDir is the directory, under the data directory, of the operator's,
	// the system account's and the TAH account's keys and JWTs. A second node
	// of a cluster of embedded servers starts with a copy of it.
	TrustDir = "trust"
)

// The files in TrustDir.
const (
	operatorSeedFile = "operator.nk"
	operatorJWTFile  = "operator.jwt"
	systemSeedFile   = "system.nk"
	systemJWTFile    = "system.jwt"
	accountSeedFile  = "tah.nk"
	accountJWTFile   = "tah.jwt"
	signingSeedFile  = "tah-signing.nk"
)

// NodeCredsPath is <dataDir>/node.creds, the node's own credential.
func NodeCredsPath(dataDir string) string { return localnode.NodeCredsPath(dataDir) }

// AdminCredsPath is <dataDir>/admin.creds, the local admin's credential.
func AdminCredsPath(dataDir string) string { return localnode.AdminCredsPath(dataDir) }

// writeSecret writes b to a new file at path, mode 0600, refusing to
// replace one (two nodes starting on one directory must not each write
// their own).
func writeSecret(path string, b []byte) error { return localnode.WriteNew(path, b, 0o600) }

// replaceSecret writes b to path atomically with mode 0600.
func replaceSecret(path string, b []byte) error { return localnode.WriteAtomic(path, b, 0o600) }

// readFile reads name in dir, wrapping ErrNoTrust when it is missing.
func readFile(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoTrust)
	}
	return b, err
}

// CopyTrust gives the data directory to the trust material of from: how a
// second node of a cluster of embedded servers comes to trust the same
// operator and share the TAH account. Only <from>/trust is copied; the new
// node issues its own node.creds and admin.creds from it at start. A data
// directory that has trust material already is refused (ErrTrustExists).
func CopyTrust(from, to string) error {
	src := filepath.Join(from, TrustDir)
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("trust material of %s: %w", from, err)
	}
	if _, err := os.Stat(filepath.Join(to, TrustDir)); err == nil {
		return fmt.Errorf("%s: %w", filepath.Join(to, TrustDir), ErrTrustExists)
	}
	if err := localnode.MakeDir(to); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	tmp, err := os.MkdirTemp(to, ".trust-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := writeSecret(filepath.Join(tmp, e.Name()), b); err != nil {
			return err
		}
	}
	return os.Rename(tmp, filepath.Join(to, TrustDir))
}
