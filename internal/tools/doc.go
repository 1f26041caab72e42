//go:build tools

// Package tools pins modules that the project's packages are about to use, so that
// `go mod tidy` keeps them while the packages that import them are being written.
// It is built only with the "tools" build tag, never into a binary.
package tools
