// Package store is TAH's read model: a SQLite database (modernc.org/sqlite, no
// cgo) that every node feeds from the event log, and that list, get, show,
// events and fork read.
//
// The log is the truth; this is a cache of it that can be deleted and rebuilt
// at any time. The projector (in the node) follows every shard of the log and
// hands batches of whole records to Apply, which folds them with
// projection.Apply and writes, in one transaction, every row they change
// (sessions, messages with summaries, steps, tool calls, artifacts,
// checkpoints) and the projector's position in each shard (Options.Shards). A
// restarted projector resumes each shard after its position; redelivered
// events are recognised by their shard's position and skipped, so each event
// counts exactly once. Events that cannot be folded are counted (with why the
// last one was not) and returned as Problems, never failing the batch.
//
// Apply keeps the folded states of recent sessions in memory, writes only
// the rows a batch changed, and with them a snapshot of each changed
// session's state that leaves out the lists those rows hold (snapshot.go):
// a session loads from its snapshot and rows and folding never starts over
// from its first event, and the cost of a step does not grow with the length
// of the history. The table tail holds the events folded after a snapshot
// only inside a batch (a rebuild after a panic) and in a read model of an
// older build, whose snapshots came now and then; the next snapshot drops
// them. It keeps no other copy of the log.
//
// Open checks the file's integrity (SQLite's quick_check) and that it can be
// written: a damaged file fails with ErrDamaged, to be set aside (MoveAside)
// and rebuilt; an unwritable one with ErrReadOnly, for a person to fix. With
// Options.DeferCheck the check (which reads the whole file) is the caller's,
// to run beside its work (Check, Unchecked), unless a migration is due. An
// open Store found damaged later starts over on a new file (Reset) while its
// reads go on.
//
// Every read finds its rows through an index, so that a read of one session
// costs the same beside ten sessions as beside a million: TestReadsUseIndexes
// asks SQLite for the plan of each read the store makes, and fails on one
// that reads a whole table or builds an index of one for itself. A listing
// reads the sessions in the order of an index, most recent first (of its
// status or its tenant, when it is filtered by one), and stops at its page.
// Filtered by labels, it reads on until the page is full, unless a label is
// rare enough (fewer than the square root of the page times the sessions
// hold it) that reading its sessions from session_labels and sorting them
// costs less: 0.3 ms against 8.4 ms for a page of a label that 10 of 10,000
// sessions have (BenchmarkListByLabel). A partial index
// (sessions_parent) serves only a query that restates its condition.
//
// The actors never use this package: their state comes from the log. Nothing
// here knows about NATS.
//
// The smallest use:
//
//	st, err := store.OpenWith(ctx, ".tah/data.db", store.Options{Shards: b.Shards()})
//	...
//	defer st.Close()
//	res, err := st.Apply(ctx, events) // whole records read from the log's shards, each in stream order
//	for _, p := range res.Problems {
//		log.Printf("skipped: %v", p)
//	}
//	page, err := st.ListSessions(ctx, store.ListOptions{Limit: 20})
//	msgs, err := st.Messages(ctx, page.Sessions[0].ID)
package store
