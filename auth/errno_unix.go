//go:build unix

package auth

import "syscall"

// errNotEmpty is what renaming a directory onto a non-empty one fails with.
var errNotEmpty error = syscall.ENOTEMPTY
