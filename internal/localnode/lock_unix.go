//go:build unix

package nodecmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on <dir>/node.lock for as long as the
// node runs: two nodes on one data directory would corrupt each other's store.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "node.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, failed(fmt.Errorf("lock %s: %w", path, err), "")
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		who := "another tah-node"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			who = fmt.Sprintf("another tah-node (pid %d)", pid)
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, failed(fmt.Errorf("%s already uses the data directory %s", who, dir),
				"stop it, or give this node its own directory with --data-dir (TAH_DATA_DIR)")
		}
		return nil, failed(fmt.Errorf("lock %s: %w", path, err), "")
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
