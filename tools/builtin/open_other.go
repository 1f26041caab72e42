//go:build !unix

package builtin

const openNonblock = 0
