//go:build unix

package builtin

import "syscall"

// openNonblock keeps opening a named pipe from blocking.
const openNonblock = syscall.O_NONBLOCK
