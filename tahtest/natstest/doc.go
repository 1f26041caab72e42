// Package natstest runs clusters for tests: members joined by routes on
// 127.0.0.1 (R3 JetStream), each at its place of a Layout (a server name, a
// data directory in a fresh temporary directory, free ports kept across
// restarts), that a test starts, kills, stops and restarts, and whose
// leaders it reads, moves and waits for.
//
// A member is anything that runs a NATS server at its place (Member): this
// package's are NATS servers alone, for the tests of replicated streams
// (package bus's own tests, which is why this package imports nothing of
// TAH); package tahtest's are TAH nodes, in this process or as processes.
// Both are the one Cluster.
//
//	func TestR3(t *testing.T) {
//		c := natstest.Start(t, 3) // three servers, ready
//		nc := c.Connect()
//		...
//		c.Kill(c.StreamLeader("TAH_EVT_0"))
//		c.WaitLeaders("TAH_EVT_0")
//		c.Start(i) // again, on the same ports and store
//	}
//
// The harness takes a TB (*testing.T and *testing.B are ones) and fails it
// when it cannot do what it says; a program that is not a test makes one with
// Run. Every wait is a poll with a generous bound; everything a cluster
// started ends with the test, and its directory goes too (unless the
// environment sets TAHTEST_KEEP). Clusters of the machine's test processes
// form in turns, as many at once as it has cores (forming.go), and a cluster
// that stops answering says which goroutines of NATS have waited minutes
// (Stuck).
package natstest
