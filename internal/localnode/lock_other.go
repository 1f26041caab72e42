//go:build !unix

package localnode

// Lock does nothing where flock is not available.
func Lock(dir string) (unlock func(), err error) { return func() {}, nil }
