package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// stmts are the writer's statements, prepared once at Open: Apply runs them
// thousands of times per second and parsing SQL would dominate.
type stmts struct {
	insertTail, insertTailChunk, pruneTail, upsertRejection *sql.Stmt
	deleteLabels, insertLabel                               *sql.Stmt
	deleteMessages, deleteSteps, deleteCalls                *sql.Stmt
	// The upserts of n rows at once (rowsOf), at index n, 1 to rowChunk.
	upsertSessions, upsertMessages, upsertSteps, upsertCalls, upsertPositions, upsertSnapshots []*sql.Stmt
	upsertArtifact, deleteArtifacts                                                            *sql.Stmt
	upsertCheckpoint, deleteCheckpoints                                                        *sql.Stmt
	all                                                                                        []*sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB) (*stmts, error) {
	s := &stmts{}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.insertTail, `INSERT INTO tail (session_id, seq, idx, type, time, epoch, data) VALUES ` + tailValues(1)},
		{&s.insertTailChunk, `INSERT INTO tail (session_id, seq, idx, type, time, epoch, data) VALUES ` + tailValues(tailChunk)},
		{&s.pruneTail, `DELETE FROM tail WHERE session_id = ? AND seq <= ?`},
		{&s.upsertRejection, `INSERT INTO rejections (session_id, count, last_error) VALUES (?, 1, ?)
			ON CONFLICT (session_id) DO UPDATE SET count = rejections.count + 1, last_error = excluded.last_error`},
		{&s.deleteLabels, `DELETE FROM session_labels WHERE session_id = ?`},
		{&s.insertLabel, `INSERT INTO session_labels (session_id, key, value) VALUES (?, ?, ?)`},
		{&s.deleteMessages, `DELETE FROM messages WHERE session_id = ? AND idx >= ?`},
		{&s.deleteSteps, `DELETE FROM steps WHERE session_id = ? AND idx >= ?`},
		{&s.deleteCalls, `DELETE FROM tool_calls WHERE session_id = ? AND idx >= ?`},
		{&s.upsertArtifact, `INSERT OR REPLACE INTO artifacts (session_id, idx, id, name, step_id, call_id, content_type,
				bucket, object, size, sha256, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.deleteArtifacts, `DELETE FROM artifacts WHERE session_id = ? AND idx >= ?`},
		{&s.upsertCheckpoint, `INSERT OR REPLACE INTO checkpoints (session_id, idx, id, up_to_seq, bucket, key, events, seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.deleteCheckpoints, `DELETE FROM checkpoints WHERE session_id = ? AND idx >= ?`},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("prepare %q: %w", firstLine(p.sql), err)
		}
		*p.dst = st
		s.all = append(s.all, st)
	}
	for _, p := range []struct {
		dst *[]*sql.Stmt
		sql string
	}{
		{&s.upsertSessions, sessionUpsert},
		{&s.upsertMessages, messageUpsert},
		{&s.upsertSteps, stepUpsert},
		{&s.upsertCalls, callUpsert},
		{&s.upsertPositions, positionUpsert},
		{&s.upsertSnapshots, snapshotUpsert},
	} {
		*p.dst = make([]*sql.Stmt, rowChunk+1)
		for n := 1; n <= rowChunk; n++ {
			st, err := db.PrepareContext(ctx, rowsOf(p.sql, n))
			if err != nil {
				s.close()
				return nil, fmt.Errorf("prepare %q for %d rows: %w", firstLine(p.sql), n, err)
			}
			(*p.dst)[n] = st
			s.all = append(s.all, st)
		}
	}
	return s, nil
}

func (s *stmts) close() error {
	var errs []error
	for _, st := range s.all {
		errs = append(errs, st.Close())
	}
	s.all = nil
	return errors.Join(errs...)
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// tailColumns is how many values a row of the table tail takes.
const tailColumns = 7

// tailValues is the VALUES list of n rows of the table tail.
func tailValues(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", tailColumns), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// The upserts of the rows Apply rewrites in every batch (their VALUES hold
// one row; rowsOf makes them take several). The text columns that are
// mostly empty take their value through coalesce with the empty string,
// and Apply binds NULL for an empty string (orNull): the driver copies
// every string it binds into C memory, and unbinds and frees it after the
// statement, where a NULL costs one call. Those copies were half of a
// step's binding in the projector (row 2).
const (
	sessionUpsert = `INSERT INTO sessions (id, status, turn, config, forked_from, labels, epoch, node, title,
				created_at, updated_at, last_seq, events, rejected, message_count, step_count,
				tokens_in, tokens_out, tokens_cache_read, summaries, trims, last_output, last_error, last_code, fault,
				awaiting_approval, cost_usd, cost_unpriced, budget_limits, budget_reached, turn_tokens, turn_cost_usd,
				turn_time_ms, time_ms, turn_running_since, parent, parent_session, definitions)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, turn = excluded.turn, config = excluded.config,
				forked_from = excluded.forked_from, labels = excluded.labels, epoch = excluded.epoch,
				node = excluded.node, title = excluded.title, created_at = excluded.created_at,
				updated_at = excluded.updated_at, last_seq = excluded.last_seq, events = excluded.events,
				rejected = excluded.rejected, message_count = excluded.message_count,
				step_count = excluded.step_count, tokens_in = excluded.tokens_in, tokens_out = excluded.tokens_out,
				tokens_cache_read = excluded.tokens_cache_read, summaries = excluded.summaries,
				trims = excluded.trims, last_output = excluded.last_output, last_error = excluded.last_error,
				last_code = excluded.last_code, fault = excluded.fault, awaiting_approval = excluded.awaiting_approval,
				cost_usd = excluded.cost_usd, cost_unpriced = excluded.cost_unpriced,
				budget_limits = excluded.budget_limits, budget_reached = excluded.budget_reached,
				turn_tokens = excluded.turn_tokens, turn_cost_usd = excluded.turn_cost_usd,
				turn_time_ms = excluded.turn_time_ms, time_ms = excluded.time_ms,
				turn_running_since = excluded.turn_running_since, parent = excluded.parent,
				parent_session = excluded.parent_session, definitions = excluded.definitions`
	snapshotUpsert = `INSERT INTO snapshots (session_id, seq, state) VALUES (?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, state = excluded.state`
	positionUpsert = `INSERT INTO positions (consumer, shard, seq) VALUES (?, ?, ?)
			ON CONFLICT (consumer, shard) DO UPDATE SET seq = max(positions.seq, excluded.seq)`
	messageUpsert = `INSERT INTO messages (session_id, idx, role, content, tool_calls, tool_call_id, name, is_error, summary)
			VALUES (?, ?, ?, coalesce(?, ''), ?, coalesce(?, ''), coalesce(?, ''), ?, ?)
			ON CONFLICT (session_id, idx) DO UPDATE SET role = excluded.role, content = excluded.content,
				tool_calls = excluded.tool_calls, tool_call_id = excluded.tool_call_id, name = excluded.name,
				is_error = excluded.is_error, summary = excluded.summary`
	stepUpsert = `INSERT INTO steps (session_id, idx, step_id, type, turn, status, tool, call_id, input, output,
				idempotent, artifact, request_ref, response, trim, content, error, code, start_seq, end_seq,
				started_at, ended_at, duration_ms, tokens_in, tokens_out, compaction, cost_usd, cost_unpriced, child)
			VALUES (?, ?, ?, ?, ?, ?, coalesce(?, ''), coalesce(?, ''), ?, coalesce(?, ''), ?, ?, ?, ?, ?,
				coalesce(?, ''), coalesce(?, ''), coalesce(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, ''))
			ON CONFLICT (session_id, idx) DO UPDATE SET step_id = excluded.step_id, type = excluded.type,
				turn = excluded.turn, status = excluded.status, tool = excluded.tool, call_id = excluded.call_id,
				input = excluded.input, output = excluded.output, idempotent = excluded.idempotent,
				artifact = excluded.artifact, request_ref = excluded.request_ref,
				response = excluded.response, trim = excluded.trim, content = excluded.content,
				error = excluded.error, code = excluded.code, start_seq = excluded.start_seq,
				end_seq = excluded.end_seq, started_at = excluded.started_at, ended_at = excluded.ended_at,
				duration_ms = excluded.duration_ms, tokens_in = excluded.tokens_in, tokens_out = excluded.tokens_out,
				compaction = excluded.compaction, cost_usd = excluded.cost_usd, cost_unpriced = excluded.cost_unpriced,
				child = excluded.child`
	callUpsert = `INSERT INTO tool_calls (session_id, idx, call_id, name, arguments, turn, step_id, status,
				is_error, code, has_result)
			VALUES (?, ?, ?, coalesce(?, ''), ?, ?, coalesce(?, ''), ?, ?, coalesce(?, ''), ?)
			ON CONFLICT (session_id, idx) DO UPDATE SET call_id = excluded.call_id, name = excluded.name,
				arguments = excluded.arguments, turn = excluded.turn, step_id = excluded.step_id,
				status = excluded.status, is_error = excluded.is_error, code = excluded.code,
				has_result = excluded.has_result`
)

// rowChunk is how many rows the statements of rowsOf write at once: a
// statement a row cost more in the driver than the row cost SQLite.
const rowChunk = 8

// rowsOf is sql, an INSERT of one row whose VALUES is its first
// parenthesised list (which may hold parentheses of its own, and no string
// that does), inserting n rows.
func rowsOf(sql string, n int) string {
	i := strings.Index(sql, "VALUES (") + len("VALUES ")
	j, depth := i, 0
	for ; j < len(sql); j++ {
		if sql[j] == '(' {
			depth++
		} else if sql[j] == ')' {
			if depth--; depth == 0 {
				break
			}
		}
	}
	j++
	return sql[:i] + strings.TrimSuffix(strings.Repeat(sql[i:j]+", ", n), ", ") + sql[j:]
}
