// Package tahtest runs TAH clusters for tests and benchmarks, in the spirit
// of hashicorp/raft's testing.go: N nodes, each with its embedded NATS server
// joined to the others by routes (R3), that a test starts, kills, stops and
// restarts, whose leaders it reads and waits for, and whose sessions' logs it
// reads and audits (projection.Audit).
//
// A member runs in one of two modes, behind the one API:
//
//   - InProcess: node.Start and its API in this process; fast, and the
//     test reaches the *node.Node (Node) and may give it its own model or
//     logger (EditNode). Kill shuts its server down at once, as kill -9
//     would; Stop closes the node.
//   - Process: a tah-node process of its own (built once per test binary,
//     with -race when the tests have it: TestMain calls Main); Kill is
//     SIGKILL, Stop is SIGTERM. Each run's log is kept, checked for data
//     races and panics at the end, and printed when the test failed.
//
// Both get the same configuration (config.Config, as flags for a process):
// the mock model in demo mode (each turn lists the tools root, reads its
// README, then streams an answer at Options.Pace), the built-in tools on a
// small project, shared credentials. Member i's node id and server name are
// "n<i>".
//
// The smallest use:
//
//	func TestFailover(t *testing.T) {
//		c := tahtest.Start(t, tahtest.Options{Nodes: 3})
//		c.WaitBalanced(time.Minute, c.IDs()...)
//		b := c.Bus() // a client: PublishInput, Replay, ListNodes
//		...
//		c.Kill(1)
//		rep := c.Audit(sid)
//		if probs := rep.CheckInputs(ids...); len(probs) > 0 {
//			t.Fatalf("%s\n%s", probs, rep.Dump())
//		}
//	}
//
// Outside a test (the benchmarks), natstest.Run gives the harness its TB:
//
//	err := natstest.Run(os.Stderr, "failover", func(tb natstest.TB) {
//		c := tahtest.Start(tb, tahtest.Options{Modes: map[int]tahtest.Mode{2: tahtest.Process}, Command: victim})
//		...
//	})
//
// The servers alone, without nodes, are package natstest's Start.
package tahtest
