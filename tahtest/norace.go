//go:build !race

package tahtest

const raceEnabled = false
