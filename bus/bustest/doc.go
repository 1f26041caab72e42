// Package bustest runs real NATS servers in-process for tests: one JetStream
// server per test, on a random port, with its store in the test's temporary
// directory, shut down when the test ends.
//
//	func TestX(t *testing.T) {
//		srv := bustest.Server(t)
//		nc := bustest.Connect(t, srv)
//		...
//	}
//
// NewCluster runs three (or n) such servers joined by routes, for replicated
// (R3) streams, leader changes and restarts:
//
//	c := bustest.NewCluster(t, 3)
//	nc := bustest.ConnectURL(t, c.URLs())
//	c.Restart(c.StreamLeader("TAH_EVT"))
package bustest
