// Package natsx holds what TAH's two sides of NATS, the nodes (package bus)
// and the clients (package client), must do the same way, so that it is
// written once:
//
//   - Temporary, the one rule that says an error is a temporary
//     unavailability (a server, cluster or stream not ready yet, or electing a
//     leader) that a moment's wait cures, and Retry and PublishRetrying, which
//     apply it;
//   - NewInputMsg, the message of an input (its subject, its headers
//     Tah-Command, Nats-Msg-Id and Tah-Reply-To, its size against the server's
//     max payload);
//   - DeltaFilter, which reads token deltas and drops those of an older epoch.
//
// The smallest use:
//
//	m, id, err := natsx.NewInputMsg(sid, wire.NodeSender, wire.Input{Command: wire.CommandRun, Text: "hi"}, nc.MaxPayload())
//	if err != nil { ... }                       // ErrMalformedInput, ErrPayloadTooLarge, an invalid id
//	_, err = natsx.PublishRetrying(ctx, js, m, nil) // stored once, however often it is tried
package natsx
