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
// StoreCopy makes a stream store a message twice, as a replicated stream
// can store a retried append around a leader change: what readers of the
// log must recognise and drop (docs/protocol.md, appending, rule 5).
//
// A cluster of such servers, for replicated (R3) streams, is package
// tahtest/natstest's.
package bustest
