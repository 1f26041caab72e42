//go:build !unix

package nodecmd

// lockDataDir does nothing where flock is not available.
func lockDataDir(dir string) (unlock func(), err error) { return func() {}, nil }
