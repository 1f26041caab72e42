package nodecmd

import "strings"

// staleIndexNotices are the warnings the embedded NATS server logs when a
// stream's index (its index.db, a snapshot of the stream's state that the
// server writes on a clean shutdown and now and then) is older than the
// stream's message blocks, as it is after a crash or a kill -9: the server
// then rebuilds the stream's state from the blocks themselves, which hold
// every stored message. Nothing is lost; they read like corruption ("...
// errored: prior state file") and are not. docs/operations.md, "A node dies",
// says so. A damaged index ("corrupt state file") or a damaged block stays a
// warning.
var staleIndexNotices = []string{
	"Recovering stream state from index errored: prior state file",
	"Stream state outdated, last block has additional entries, will rebuild",
	"Stream state outdated, found extra blocks, will rebuild",
	"Stream state detected prior state, could not locate msg block",
}

// staleIndex reports whether msg, a warning of the NATS server, is one of
// staleIndexNotices: the node logs it at debug.
func staleIndex(msg string) bool {
	for _, n := range staleIndexNotices {
		if strings.Contains(msg, n) {
			return true
		}
	}
	return false
}
