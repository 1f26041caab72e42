// Package node wires one TAH node together: the bus (an embedded NATS server
// or a connection to a cluster), the SQLite read model and the projector that
// feeds it from the log exactly once, the session actors, the tool runner, the
// input consumers that hand each session's inputs to its actor, and the
// request/reply API service ("tah", endpoints under tah.api.).
//
// The smallest use:
//
//	n, err := node.Start(ctx, node.Options{Bus: busCfg, Provider: provider, Tools: registry})
//	...
//	defer n.Close(ctx)
//
// Inputs are acknowledged only when the work they ask for has ended; a node
// that stops (or loses a session to another node) leaves them unacknowledged,
// so the session's next owner gets them again and resumes from the log.
package node
