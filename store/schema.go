package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are the schema, version by version: migrations[i] takes the
// database from version i to i+1 (PRAGMA user_version). Never edit a released
// entry; append a new one. Each runs in one transaction with the version bump,
// so a crash leaves the database at one version or the next, never between.
//
// Conventions: times are INTEGER Unix nanoseconds in UTC (0 or NULL when
// unknown), except tail.time, which keeps the writer's RFC 3339 text so that
// events round-trip exactly; JSON columns are TEXT; ordering indexes are
// (session_id, idx) with idx the position in the folded slice.
var migrations = []string{
	// 1: the read model of issue 6.
	`
CREATE TABLE sessions (
	id                TEXT PRIMARY KEY,
	status            TEXT NOT NULL,
	turn              INTEGER NOT NULL DEFAULT 0,
	config            TEXT NOT NULL DEFAULT '{}',
	forked_from       TEXT NOT NULL DEFAULT '',
	labels            TEXT NOT NULL DEFAULT '{}',
	epoch             INTEGER NOT NULL DEFAULT 0,
	node              TEXT NOT NULL DEFAULT '',
	title             TEXT NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL DEFAULT 0,
	updated_at        INTEGER NOT NULL DEFAULT 0,
	last_seq          INTEGER NOT NULL DEFAULT 0,
	events            INTEGER NOT NULL DEFAULT 0,
	rejected          INTEGER NOT NULL DEFAULT 0,
	message_count     INTEGER NOT NULL DEFAULT 0,
	step_count        INTEGER NOT NULL DEFAULT 0,
	tokens_in         INTEGER NOT NULL DEFAULT 0,
	tokens_out        INTEGER NOT NULL DEFAULT 0,
	tokens_cache_read INTEGER NOT NULL DEFAULT 0,
	summaries         INTEGER NOT NULL DEFAULT 0,
	trims             INTEGER NOT NULL DEFAULT 0,
	last_output       TEXT NOT NULL DEFAULT '',
	last_error        TEXT NOT NULL DEFAULT '',
	last_code         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_updated ON sessions (updated_at DESC, id DESC);

-- A JSON snapshot of each session's projection.State up to seq: the state is
-- the snapshot plus the session's applied events after it (events.error IS
-- NULL). Not in sessions: SQLite rewrites a whole row, overflow pages included,
-- on every update, and the snapshot is by far the largest value.
CREATE TABLE snapshots (
	session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL,
	state      TEXT NOT NULL
);

CREATE TABLE session_labels (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	PRIMARY KEY (session_id, key)
);
CREATE INDEX session_labels_key_value ON session_labels (key, value);

CREATE TABLE messages (
	session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx          INTEGER NOT NULL,
	role         TEXT NOT NULL,
	content      TEXT NOT NULL DEFAULT '',
	tool_calls   TEXT,
	tool_call_id TEXT NOT NULL DEFAULT '',
	name         TEXT NOT NULL DEFAULT '',
	is_error     INTEGER NOT NULL DEFAULT 0,
	summary      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, idx)
);

CREATE TABLE steps (
	session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx         INTEGER NOT NULL,
	step_id     TEXT NOT NULL,
	type        TEXT NOT NULL,
	turn        INTEGER NOT NULL DEFAULT 0,
	status      TEXT NOT NULL,
	tool        TEXT NOT NULL DEFAULT '',
	call_id     TEXT NOT NULL DEFAULT '',
	input       TEXT,
	output      TEXT NOT NULL DEFAULT '',
	idempotent  INTEGER NOT NULL DEFAULT 0,
	artifact    TEXT,
	request     TEXT,
	response    TEXT,
	trim        TEXT,
	content     TEXT NOT NULL DEFAULT '',
	error       TEXT NOT NULL DEFAULT '',
	code        TEXT NOT NULL DEFAULT '',
	start_seq   INTEGER NOT NULL DEFAULT 0,
	end_seq     INTEGER NOT NULL DEFAULT 0,
	started_at  INTEGER NOT NULL DEFAULT 0,
	ended_at    INTEGER NOT NULL DEFAULT 0,
	duration_ms INTEGER NOT NULL DEFAULT 0,
	tokens_in   INTEGER NOT NULL DEFAULT 0,
	tokens_out  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, idx)
);

CREATE TABLE tool_calls (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	call_id    TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	arguments  TEXT,
	turn       INTEGER NOT NULL DEFAULT 0,
	step_id    TEXT NOT NULL DEFAULT '',
	status     TEXT NOT NULL,
	is_error   INTEGER NOT NULL DEFAULT 0,
	code       TEXT NOT NULL DEFAULT '',
	has_result INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, idx)
) WITHOUT ROWID;

CREATE TABLE artifacts (
	session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx          INTEGER NOT NULL,
	id           TEXT NOT NULL,
	name         TEXT NOT NULL DEFAULT '',
	step_id      TEXT NOT NULL DEFAULT '',
	call_id      TEXT NOT NULL DEFAULT '',
	content_type TEXT NOT NULL DEFAULT '',
	bucket       TEXT NOT NULL DEFAULT '',
	object       TEXT NOT NULL DEFAULT '',
	size         INTEGER NOT NULL DEFAULT 0,
	sha256       TEXT NOT NULL DEFAULT '',
	seq          INTEGER NOT NULL,
	PRIMARY KEY (session_id, idx)
);

CREATE TABLE checkpoints (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	id         TEXT NOT NULL,
	up_to_seq  INTEGER NOT NULL DEFAULT 0,
	bucket     TEXT NOT NULL DEFAULT '',
	key        TEXT NOT NULL DEFAULT '',
	events     INTEGER NOT NULL DEFAULT 0,
	seq        INTEGER NOT NULL,
	PRIMARY KEY (session_id, idx)
);

-- Every event consumed, applied or not; no foreign key, because an event may
-- precede (or never have) its session.created. error is NULL for an event that
-- was folded and says why otherwise.
CREATE TABLE events (
	seq        INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,
	type       TEXT NOT NULL,
	time       TEXT NOT NULL DEFAULT '',
	epoch      INTEGER NOT NULL DEFAULT 0,
	data       TEXT,
	error      TEXT
);
CREATE INDEX events_session ON events (session_id, seq);

-- The last stream sequence each consumer applied, committed with the rows.
CREATE TABLE positions (
	consumer TEXT PRIMARY KEY,
	seq      INTEGER NOT NULL
);
`,
	// 2: llm.started records its request by reference (issue 15): a step keeps
	// that reference (projection.Step.RequestRef), never the whole request,
	// which the log rebuilds (tah.api.request). The requests of older steps go.
	`
ALTER TABLE steps RENAME COLUMN request TO request_ref;
UPDATE steps SET request_ref = NULL WHERE request_ref IS NOT NULL;
`,
	// 3: the sharded log of records (log schema version 2). Its sequences are
	// per shard and shared by the events of a record, and the log migrated
	// from version 1 has new ones: the read model starts over from the log.
	// Only what it queries or needs is kept: no copy of every event.
	`
DELETE FROM checkpoints;
DELETE FROM artifacts;
DELETE FROM tool_calls;
DELETE FROM steps;
DELETE FROM messages;
DELETE FROM session_labels;
DELETE FROM snapshots;
DELETE FROM sessions;
DROP TABLE events;
DROP TABLE positions;

-- The events folded after each session's snapshot: the state is the
-- snapshot plus these, which go when the next snapshot is written. No
-- foreign key: a session's events may come before its row is written.
CREATE TABLE tail (
	session_id TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	idx        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	time       TEXT NOT NULL DEFAULT '',
	epoch      INTEGER NOT NULL DEFAULT 0,
	data       TEXT,
	PRIMARY KEY (session_id, seq, idx)
) WITHOUT ROWID;

-- The events of each session consumed but not folded (see Problem): how
-- many, and why the last one was not. A session may have some before (or
-- without) its row.
CREATE TABLE rejections (
	session_id TEXT PRIMARY KEY,
	count      INTEGER NOT NULL,
	last_error TEXT NOT NULL
);

-- The last stream sequence each consumer applied from each shard of the log,
-- committed with the rows.
CREATE TABLE positions (
	consumer TEXT NOT NULL,
	shard    INTEGER NOT NULL,
	seq      INTEGER NOT NULL,
	PRIMARY KEY (consumer, shard)
);
`,
	// 4: a session's log may be faulted (projection.Fault: a corrupt log, or
	// one that needs a newer node): the fault as JSON, '' for none.
	`
ALTER TABLE sessions ADD COLUMN fault TEXT NOT NULL DEFAULT '';
`,
	// 5: a compaction's model call is an LLM step marked as compaction
	// (projection.Step.Compaction).
	`
ALTER TABLE steps ADD COLUMN compaction INTEGER NOT NULL DEFAULT 0;
`,
	// 6: a turn that waits for a person to approve tool calls
	// (projection.State.AwaitingApproval; status waiting_tool).
	`
ALTER TABLE sessions ADD COLUMN awaiting_approval INTEGER NOT NULL DEFAULT 0;
`,
	// 7: the cost of LLM calls, as their events record it (projection's
	// Step.Cost and State.Cost): US dollars (REAL, rounded to the
	// nano-dollar) and the calls of a model without a price. A step's
	// cost_usd is NULL when its event recorded none. Rows written before
	// have none: the log's older events record none either, and a session
	// gets its figures with its next write.
	`
ALTER TABLE sessions ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_unpriced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN cost_usd REAL;
ALTER TABLE steps ADD COLUMN cost_unpriced INTEGER NOT NULL DEFAULT 0;
`,
	// 8: budgets (wire.SessionBudget): the limits in force for the current
	// (or last) turn and the session (projection.State.BudgetLimits, as
	// JSON, '' for none), the limit the last turn reached (LastBudget, as
	// JSON, '' for none), and the spend they are checked against that the
	// other columns do not hold already (the session's tokens and cost
	// are tokens_in + tokens_out and cost_usd): the current (or last)
	// turn's tokens and cost, the wall time it and all the session's turns
	// ran (TurnTimeMS, TimeMS) and when the running turn last started
	// running (Unix nanoseconds, 0 between turns), for a reader to add the
	// time since. Rows written before have none until the session's next
	// write, as with 7.
	`
ALTER TABLE sessions ADD COLUMN budget_limits TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN budget_reached TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN turn_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_time_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN time_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_running_since INTEGER NOT NULL DEFAULT 0;
`,
	// 9: sub-agents (projection.State.Parent, Step.Child): a child
	// session's link to the call of its parent that made it (JSON, '' for
	// none) with the parent's id apart, indexed, for the parent's children
	// and the roll-up of their usage; a sub-agent call's step names its
	// child session. No row written before has either: no build before
	// made sub-agents.
	`
ALTER TABLE sessions ADD COLUMN parent TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN parent_session TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_parent ON sessions (parent_session) WHERE parent_session != '';
ALTER TABLE steps ADD COLUMN child TEXT NOT NULL DEFAULT '';
`,
	// 10: the definitions of the agent a session's turns ran under
	// (projection.State.Definitions: one entry per change, from the turn
	// it took effect), JSON, '' for none; tah.api.get returns them. No row
	// written before has any: no build before recorded them.
	`
ALTER TABLE sessions ADD COLUMN definitions TEXT NOT NULL DEFAULT '';
`,
	// 11: listings that read their own index, most recent first. One
	// filtered by status (tahctl list --status, the UI's filter) read the
	// sessions in sessions_updated's order until its page was full: with a
	// status few sessions have, all of them (3.1 ms at 10,000 sessions,
	// 0.1 ms with sessions_status). A tenant's sorted all the tenant's
	// sessions for each page (23.6 ms for a page of 50 of 10,000, 0.7 ms
	// with sessions_tenant); tenant is the id's part before its '.'
	// (event.TenantSep; '' for the default tenant), computed, not stored.
	// The indexes move with every write of a session's row, as
	// sessions_updated does: no cost measurable in store's BenchmarkProject.
	`
CREATE INDEX sessions_status ON sessions (status, updated_at DESC, id DESC);
ALTER TABLE sessions ADD COLUMN tenant TEXT GENERATED ALWAYS AS (substr(id, 1, instr(id, '.') - 1)) VIRTUAL;
CREATE INDEX sessions_tenant ON sessions (tenant, updated_at DESC, id DESC);
`,
}

// SchemaVersion is the schema version this build writes (PRAGMA user_version).
func SchemaVersion() int { return len(migrations) }

// migrate brings db to SchemaVersion, one migration per transaction, refusing a
// newer database.
func migrate(ctx context.Context, db *sql.DB) error {
	for {
		done, err := migrateOne(ctx, db)
		if err != nil || done {
			return err
		}
	}
}

// migrationDue reports whether the file's schema is older than this
// build's: Open then migrates it.
func migrationDue(ctx context.Context, db *sql.DB) (bool, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	return v < len(migrations), nil
}

// migrateOne applies the next migration, if any. The version is read inside the
// write transaction (BEGIN IMMEDIATE), so two processes opening the same file
// never apply the same migration twice.
func migrateOne(ctx context.Context, db *sql.DB) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > len(migrations):
		return false, fmt.Errorf("schema version %d, this build knows up to %d: %w; "+
			"upgrade TAH, or delete the file and let the projector rebuild it from the log", v, len(migrations), ErrNewerSchema)
	case v == len(migrations):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migration %d: %w", v+1, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
		return false, fmt.Errorf("migration %d: %w", v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %d: %w", v+1, err)
	}
	return false, nil
}
