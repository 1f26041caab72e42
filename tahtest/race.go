//go:build race

package tahtest

// raceEnabled: this binary has the race detector, and so will the tah-node
// it builds.
const raceEnabled = true
