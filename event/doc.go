// Package event is the schema of TAH's durable log: the record that every
// message of the log's streams carries (the events of one session that one
// append wrote together), the event, and the typed payload of every event
// type.
//
// A session's history is nothing but its events, in log order: by stream
// sequence (Event.Seq, the sequence of the event's record), then by position
// in the record (Event.Index); the time is informative. The body of a message
// is a Record of schema version SchemaVersion (EncodeRecord, DecodeRecord);
// DecodeRecord also reads version 1, one event envelope per message. Event types
// use the specification's names where it gives them ("session.created",
// "llm.completed", "tool.finished", "agent.context.trimmed", ...); see Types for
// the full list and docs/schema/ for the JSON Schema of every payload.
//
// The smallest use:
//
//	ev, err := event.New("s_4f2k", event.TurnStarted, event.TurnStartedData{
//		Turn: 1, Message: llm.User("hello"),
//	})
//	...
//	payload, err := ev.Decode() // *event.TurnStartedData
//	body, err := event.EncodeRecord([]event.Event{ev}) // the body of one message
//	evs, err := event.DecodeRecord(body, seq)           // its events, Seq and Index set
//
// The JSON is encoding/json's, byte for byte and value for value. A tool
// step's four payloads (llm.started, llm.completed, tool.started,
// tool.finished) and a record's body are written and read by hand on the
// hot path (encode.go, decode.go: every step writes them once and every
// reader of the log reads them again), falling back to encoding/json for
// anything not in its usual form; fuzz tests hold the hand-written code to
// encoding/json on any input.
//
// This package imports nothing of NATS, SQLite or actors: it is shared by the
// loop, the read model and clients.
package event
