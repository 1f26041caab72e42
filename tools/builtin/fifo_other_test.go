//go:build !unix

package builtin_test

import "testing"

func mkfifo(t *testing.T, path string) bool { return false }
