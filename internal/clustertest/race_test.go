//go:build race

package clustertest

// raceEnabled: the nodes are built with -race too.
const raceEnabled = true
