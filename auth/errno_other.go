//go:build !unix

package auth

import "errors"

// errNotEmpty is what renaming a directory onto a non-empty one fails with.
var errNotEmpty = errors.New("directory not empty")
