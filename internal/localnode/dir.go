package localnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// IgnoreFile is the .gitignore that MakeDir writes into a data directory.
const IgnoreFile = ".gitignore"

// ignoreRules ignore everything in the directory, the file itself included:
// a data directory holds the operator's and the account's seeds and
// credentials, and a `git add -A` in the project around it must not commit
// them.
const ignoreRules = `# Written by TAH: this directory holds secrets (the operator's and the
# accounts' seeds, credentials) and a node's data. Keep it out of version
# control: never commit or copy it into a repository.
*
`

// MakeDir creates dir (mode 0700, with its parents) when it is missing and
// writes a .gitignore that ignores all of it when it has none, so that a
// data directory made inside a git work tree never shows up in `git add -A`.
// A .gitignore already there is left as it is.
func MakeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	err := WriteNew(filepath.Join(dir, IgnoreFile), []byte(ignoreRules), 0o644)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", filepath.Join(dir, IgnoreFile), err)
	}
	return nil
}
