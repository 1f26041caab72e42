// Package wire is TAH's public contract on NATS, in one place: the names of
// the streams and buckets, every subject and header, every payload that
// crosses the bus (inputs, outcomes and refusals, token deltas, node
// presence, the requests and replies of the API service, the messages of tool
// services), their error codes, and the protocol version. docs/protocol.md
// describes it for implementers in any language; docs/schema/ holds the JSON
// Schema of every payload, generated from these types (make schema) and
// checked by this package's tests against the documents' examples.
//
// The event log's record (the body of its messages), event envelope and
// payloads are the package event; wire refers to them and never redefines
// them. wire names the log's shards and the subjects in them, and the shard
// function clients use to find a session's (Shard).
//
// wire imports only pure packages (event, llm, projection): no NATS client, no
// server, no SQLite. Nodes (package bus, node), the Go client (package client),
// tahctl, tool services and the benchmarks all build their subjects, headers
// and bodies from here, so that the contract cannot drift between them.
//
// The smallest use:
//
//	in := wire.Input{ID: "in_1", Command: wire.CommandRun, Text: "hello"}
//	if err := in.Validate(); err != nil { ... }     // wraps wire.ErrMalformedInput
//	subj := wire.InputSubject("s_4f2k9q1w7e3r5t6y8v0b") // tah.sess.s_….in
//	// publish json.Marshal(in) to subj with the header wire.HeaderCommand: "run"
package wire
