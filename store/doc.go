// Package store is TAH's read model: a SQLite database (modernc.org/sqlite, no
// cgo) that every node feeds from the event log, and that list, get, show,
// events and fork read.
//
// The log is the truth; this is a cache of it that can be deleted and rebuilt
// at any time. The projector (in the node) consumes TAH_EVT and hands each
// batch to Apply, which folds it with projection.Apply and writes, in one
// transaction, the raw events, every row they change (sessions, messages with
// summaries, steps, tool calls, artifacts, checkpoints) and the projector's
// position. A restarted projector resumes after Position; redelivered events
// are recognised by their stream sequence and skipped, so each event counts
// exactly once. Events that cannot be folded are stored, counted and returned
// as Problems, never failing the batch.
//
// Apply keeps the folded states of recent sessions in memory and snapshots
// them now and then in a table of their own, so folding never starts over from
// a session's first event, and it writes only the rows a batch changed: the
// cost of a step does not grow with the length of the history.
//
// The actors never use this package: their state comes from the log. Nothing
// here knows about NATS.
//
// The smallest use:
//
//	st, err := store.Open(ctx, ".tah/data.db")
//	...
//	defer st.Close()
//	res, err := st.Apply(ctx, events) // a batch read from TAH_EVT, in stream order
//	for _, p := range res.Problems {
//		log.Printf("skipped: %v", p)
//	}
//	page, err := st.ListSessions(ctx, store.ListOptions{Limit: 20})
//	msgs, err := st.Messages(ctx, page.Sessions[0].ID)
package store
