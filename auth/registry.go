package auth

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tah-dev/tah/wire"
)

// registryFile lists the credentials issued from the trust material, one
// JSON Entry a line (never a seed), mode 0600, in TrustDir.
const registryFile = "issued.jsonl"

// Entry is one issued credential (a line of the registry: its Revoked is
// read from the account's JWT, never written).
type Entry = wire.Credential

// Record adds e to the registry of issued credentials.
func (t *Trust) Record(e Entry) error {
	e.Revoked = false
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	path := filepath.Join(t.dataDir, TrustDir, registryFile)
	// One write of one line with O_APPEND: two issuers at once do not mix
	// their lines.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("registry of credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("registry of credentials: %w", err)
	}
	return f.Close()
}

// Entries lists the issued credentials, oldest first, each with whether it
// is revoked.
func (t *Trust) Entries() ([]Entry, error) {
	path := filepath.Join(t.dataDir, TrustDir, registryFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry of credentials: %w", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %v: %w", path, line, err, ErrBadTrust)
		}
		e.Revoked = Revoked(t.AccountJWT(), e.PublicKey, e.Issued)
		out = append(out, e)
	}
	return out, sc.Err()
}
