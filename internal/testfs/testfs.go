// Package testfs holds what tests of several packages do to files: make one
// that takes no write, as root too.
package testfs

import (
	"os"
	"os/exec"
	"testing"
)

// ReadOnly makes path take no write until the test ends. As root permission
// bits stop nothing, so the file is made immutable (chattr +i) and the test
// is skipped where that fails; elsewhere its mode becomes 0444.
func ReadOnly(t testing.TB, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("as root only an immutable file is read-only, and chattr +i %s failed: %v %s", path, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
}
