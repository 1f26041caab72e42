package bus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// legacyCredentialsFile is where a node of the user-and-password era kept
// its NATS password in the clear; the upgrade removes it.
const legacyCredentialsFile = "credentials.json"

// globalAccount is the NATS account of a server without operator: a data
// directory of the user-and-password era has its streams there.
const globalAccount = "$G"

// ErrUpgrade is wrapped when a data directory of the user-and-password era
// cannot be moved into the TAH account by itself.
var ErrUpgrade = errors.New("the data directory cannot be upgraded to operator mode")

// adoptGlobalAccount moves the streams of a data directory of the
// user-and-password era (JetStream keeps them per account, under
// <store>/jetstream/$G) to the TAH account's directory, before the server
// starts: its sessions, checkpoints, artifacts and pending inputs follow. A
// renaming of one directory: it happens entirely or not at all. A clustered
// store is refused: its meta group records the account of every stream, and
// only every server's moving at once would keep them together; `tahctl
// upgrade-cluster` (package internal/upgrade) copies such a cluster's
// sessions into a new one instead.
func adoptGlobalAccount(cfg Config, storeDir, account string) error {
	js := filepath.Join(storeDir, "jetstream")
	old, adopted := filepath.Join(js, globalAccount), filepath.Join(js, account)
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(adopted); err == nil {
		return fmt.Errorf("%s holds the streams of the user-and-password era and %s those of the TAH account: "+
			"move one of them away (the TAH account's, if it has no session you need) and start again: %w", old, adopted, ErrUpgrade)
	}
	if _, err := os.Stat(filepath.Join(js, "$SYS", "_js_")); err == nil || cfg.Cluster.Name != "" {
		return fmt.Errorf("%s is a clustered store of the user-and-password era, whose sessions are copied, not moved: "+
			"run this cluster on the previous version, start the new one on new data directories, and on a new node's machine run "+
			"`tahctl upgrade-cluster --from <this cluster's URL> --from-credentials %s` "+
			"(docs/security.md, \"Upgrading a data directory of the user-and-password era\"): %w",
			old, filepath.Join(cfg.DataDir, legacyCredentialsFile), ErrUpgrade)
	}
	if err := os.Rename(old, adopted); err != nil {
		return fmt.Errorf("move the streams of %s into the TAH account: %w", old, err)
	}
	if cfg.Logger != nil {
		cfg.Logger.Info("upgraded the data directory to NATS operator mode: its streams are the TAH account's",
			"from", old, "to", adopted)
	}
	legacy := filepath.Join(cfg.DataDir, legacyCredentialsFile)
	if err := os.Remove(legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the plaintext password of the user-and-password era (%s): %w: delete it by hand", legacy, err)
	}
	return nil
}
