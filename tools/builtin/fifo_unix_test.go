//go:build unix

package builtin_test

import (
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, path string) bool {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return true
}
