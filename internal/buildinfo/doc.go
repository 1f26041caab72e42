// Package buildinfo says which build a binary is, from what the go command
// recorded in it (runtime/debug.ReadBuildInfo): the module version, the VCS
// revision and time, and whether the tree had uncommitted changes. tah-node
// and tahctl print it for --version.
//
//	fmt.Println(buildinfo.Describe("tahctl"))
//	// tahctl v0.3.0 (rev 9e39c49a1b2c, 2026-12-01T22:14:03Z, modified) go1.27.3
package buildinfo
