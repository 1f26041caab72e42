// Package event is the schema of TAH's durable log: the envelope that every entry of
// the stream TAH_EVT carries, and the typed payload of every event type.
//
// A session's history is nothing but its events, in stream order. The stream
// sequence (Event.Seq) is the only ordering; the time is informative. Event types
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
//
// This package imports nothing of NATS, SQLite or actors: it is shared by the
// loop, the read model and clients.
package event
