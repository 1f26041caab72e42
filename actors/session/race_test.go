//go:build race

package session

// raceDetector: the race detector slows the tests down several times over.
const raceDetector = true
