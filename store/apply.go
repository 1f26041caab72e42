package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Problem is an event that was consumed but not folded: an unknown type, a
// malformed payload, an event inconsistent with its session's history (an
// event older than the session's last one included: a true redelivery, at or
// below its shard's position, is only counted as Skipped), an invalid
// session id. It is counted in its session's Rejected, with why (the table
// rejections), and the batch goes on: a reader of the log skips what it
// cannot fold, as projection.Fold does. The exception, not counted: an event
// without a sequence.
type Problem struct {
	Seq     uint64
	Index   int
	Session string
	Type    event.Type
	// Err wraps the cause: projection.ErrInconsistent, projection.ErrOutOfOrder,
	// event.ErrUnknownType, event.ErrMalformed, event.ErrInvalidSessionID,
	// ErrNoSequence or ErrPanic.
	Err error
}

func (p Problem) Error() string {
	return fmt.Sprintf("event %d.%d %q of session %q: %v", p.Seq, p.Index, p.Type, p.Session, p.Err)
}

func (p Problem) Unwrap() error { return p.Err }

// ApplyResult says what one Apply did.
type ApplyResult struct {
	Applied int // events folded into their sessions
	Skipped int // events already applied (redeliveries), ignored
	// Problems are the events consumed but not folded, in batch order.
	Problems []Problem
	// Positions are the consumer's positions after the batch: for each shard
	// of the log, the highest stream sequence applied so far.
	Positions []uint64
	// MessageRows is how many message rows the batch wrote: the messages the
	// batch added, plus those after an insertion point (a tool result or summary
	// inserted before the end shifts the rows after it).
	MessageRows int
}

// Apply folds a batch of whole records (their events, from any sessions and
// shards, each shard's in log order) into the read model, in one transaction:
// every row they change and the consumer's positions commit together or not
// at all, so a crash between (or during) batches never loses or doubles an
// event. Apply is idempotent: an event at or below its shard's position
// (wire.Shard of its session among Options.Shards) is skipped, so redelivered
// batches are harmless; a batch must hold whole records, since the position
// covers a record's every event. Events that cannot be folded are counted and
// reported in ApplyResult.Problems; they never fail the batch.
//
// The error is for the batch as a whole (I/O, ctx, ErrClosed): nothing of it
// was applied and it may be retried.
func (s *Store) Apply(ctx context.Context, events []event.Event) (ApplyResult, error) {
	return s.ApplyThrough(ctx, events, nil)
}

// ApplyThrough is Apply that also moves each shard k's position to through[k]
// where that is further: the records between the batch's and through[k] were
// read and hold nothing to fold (copies of a record the stream stored twice,
// see bus.RecordFunc), and a restart must not meet them again. through may be
// nil, or have one entry per shard.
func (s *Store) ApplyThrough(ctx context.Context, events []event.Event, through []uint64) (ApplyResult, error) {
	if err := s.checkOpen(); err != nil {
		return ApplyResult{}, err
	}
	if through != nil && len(through) != s.opts.Shards {
		return ApplyResult{}, fmt.Errorf("store: apply: positions of %d shards for a log of %d", len(through), s.opts.Shards)
	}
	if len(events) == 0 && !slices.ContainsFunc(through, func(seq uint64) bool { return seq > 0 }) {
		pos, err := s.Positions(ctx, s.opts.Consumer)
		return ApplyResult{Positions: pos}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkOpen(); err != nil {
		return ApplyResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return ApplyResult{}, fmt.Errorf("store: apply: %w", err)
	}
	// The transaction and its statements run on a context that is never
	// done, and the batch checks ctx itself, between events and before the
	// commit: the SQLite driver starts a goroutine to watch a context that
	// can be done for every statement (and the transaction one more), to
	// interrupt it, where each of the batch's statements is short. That was
	// a tenth of the read model's work per step.
	stmtCtx := context.WithoutCancel(ctx)
	tx, err := s.w.BeginTx(stmtCtx, nil)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("store: apply: %w", err)
	}
	b := &batch{s: s, ctx: stmtCtx, done: ctx, tx: tx, touched: make(map[string]*entry)}
	if s.pos == nil {
		if s.pos, err = s.positions(stmtCtx, tx, s.opts.Consumer); err != nil {
			tx.Rollback()
			return ApplyResult{}, fmt.Errorf("store: apply: %w", err)
		}
	}
	b.from, b.to = s.pos, slices.Clone(s.pos)
	committed := false
	defer func() {
		if !committed { // an error, or a panic on its way up
			tx.Rollback()
			s.pos = nil // read them again: the commit may have failed after it wrote them
			// The in-memory states of the batch's sessions are ahead of the rows
			// now: forget them, the next use reloads them from what was committed.
			for _, e := range b.order {
				s.cache.remove(e.id)
			}
		}
	}()
	for k, seq := range through {
		b.to[k] = max(b.to[k], seq)
	}
	if err := b.run(events); err != nil {
		return ApplyResult{}, fmt.Errorf("store: apply: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ApplyResult{}, fmt.Errorf("store: apply: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return ApplyResult{}, fmt.Errorf("store: apply: commit: %w", err)
	}
	committed = true
	s.pos = slices.Clone(b.to) // b.to is the caller's too (ApplyResult.Positions)
	for _, e := range b.order {
		s.cache.put(e)
	}
	b.count()
	return b.res, nil
}

// batch is one Apply in progress.
type batch struct {
	s *Store
	// ctx is the statements' (never done), done the caller's, which the
	// batch checks between events.
	ctx, done context.Context
	tx        *sql.Tx
	touched   map[string]*entry
	order     []*entry // touched, in order of first touch
	res       ApplyResult
	// from are the shards' positions before the batch, to those after it.
	from, to []uint64

	stepRows, callRows, snapshotRows, hits, misses, refolded, tailRows, statements int

	// tail are the events folded whose rows of the table tail are not
	// written yet (writeTail).
	tail []event.Event

	txStmts map[*sql.Stmt]*sql.Stmt

	// The rows of the batch's sessions, gathered across sessions into
	// statements of rowChunk rows (rowWriter): with many sessions in a
	// batch, each with a record or two, a session had a statement of one
	// or two rows in each table.
	sessions, messages, steps, calls, positions, snapshots *rowWriter
}

// stmt is the prepared statement p bound to the batch's transaction, once per
// batch (Tx.Stmt allocates and registers a new one on every call).
func (b *batch) stmt(p *sql.Stmt) *sql.Stmt {
	if ts := b.txStmts[p]; ts != nil {
		return ts
	}
	if b.txStmts == nil {
		b.txStmts = make(map[*sql.Stmt]*sql.Stmt)
	}
	ts := b.tx.StmtContext(b.ctx, p)
	b.txStmts[p] = ts
	return ts
}

// exec runs the prepared statement p in the batch's transaction, and
// counts it (Stats.Statements; the test hook afterStatement).
func (b *batch) exec(p *sql.Stmt, args ...any) (sql.Result, error) {
	res, err := b.stmt(p).ExecContext(b.ctx, args...)
	if err != nil {
		return res, err
	}
	b.statements++
	if b.s.afterStatement != nil {
		err = b.s.afterStatement(b.statements)
	}
	return res, err
}

func (b *batch) run(events []event.Event) error {
	st := b.s.stmts
	b.sessions, b.positions = b.rows(st.upsertSessions), b.rows(st.upsertPositions)
	b.messages, b.steps, b.calls = b.rows(st.upsertMessages), b.rows(st.upsertSteps), b.rows(st.upsertCalls)
	b.snapshots = b.rows(st.upsertSnapshots)
	for i, e := range events {
		if err := b.done.Err(); err != nil {
			return err
		}
		if err := b.event(e); err != nil {
			return err
		}
		if b.s.afterEvent != nil {
			if err := b.s.afterEvent(i); err != nil {
				return err
			}
		}
	}
	// A session whose snapshot this batch writes needs no tail rows of
	// the events the snapshot holds: the snapshot prunes them at once.
	var snapshotted map[string]bool
	for _, e := range b.order {
		if b.snapshotNow(e) {
			if snapshotted == nil {
				snapshotted = make(map[string]bool)
			}
			snapshotted[e.id] = true
		}
	}
	if err := b.writeTail(snapshotted); err != nil {
		return err
	}
	// The sessions' rows first, all of them: every other row refers to its
	// session's (a foreign key), and the rows of several sessions go out
	// together.
	for _, e := range b.order {
		if e.dirty && e.st.ID != "" {
			if err := b.writeSession(e); err != nil {
				return fmt.Errorf("session %q: %w", e.id, err)
			}
		}
	}
	if err := b.sessions.flush(); err != nil {
		return fmt.Errorf("rows of sessions: %w", err)
	}
	for _, e := range b.order {
		if e.dirty {
			if err := b.flush(e); err != nil {
				return fmt.Errorf("session %q: %w", e.id, err)
			}
		}
	}
	for _, w := range []struct {
		rows *rowWriter
		what string
	}{{b.messages, "messages"}, {b.steps, "steps"}, {b.calls, "tool calls"}, {b.snapshots, "snapshots"}} {
		if err := w.rows.flush(); err != nil {
			return fmt.Errorf("rows of %s: %w", w.what, err)
		}
	}
	for k, seq := range b.to {
		if seq == b.from[k] {
			continue
		}
		if err := b.positions.add(b.s.opts.Consumer, k, int64(seq)); err != nil {
			return fmt.Errorf("positions: %w", err)
		}
	}
	if err := b.positions.flush(); err != nil {
		return fmt.Errorf("positions: %w", err)
	}
	b.res.Positions = b.to
	return nil
}

// event folds e into its session, unless its shard's position says it was
// applied already.
func (b *batch) event(e event.Event) error {
	if e.Seq == 0 {
		b.problem(e, ErrNoSequence)
		return nil
	}
	k := wire.Shard(e.Session, len(b.from))
	if e.Seq <= b.from[k] {
		b.res.Skipped++ // a redelivery
		return nil
	}
	b.to[k] = max(b.to[k], e.Seq)
	if err := event.ValidSessionID(e.Session); err != nil {
		return b.reject(nil, e, err)
	}
	ent, err := b.entry(e.Session)
	if err != nil {
		return err
	}
	if e.Type == "" {
		return b.unreadable(ent, e)
	}
	// The read model folds what it can (Apply), and shows the session's fault:
	// the first event ApplyLog would refuse, where the session's owner stops.
	var owner error
	if ent.st.Fault == nil {
		owner = projection.CheckOwner(&ent.st, e)
	}
	// The payload is decoded once, for the bounds and the fold.
	payload, derr := e.Decode()
	if derr != nil {
		payload = nil
	}
	bd := changeBounds(&ent.st, e, payload)
	if err := b.s.safeApply(&ent.st, e, payload); err != nil {
		if rerr := b.reject(ent, e, err); rerr != nil {
			return rerr
		}
		if errors.Is(err, ErrPanic) {
			return b.rebuild(ent) // a bug of this build, not of the log
		}
		b.fault(ent, projection.EventFault(e, err))
		return nil
	}
	if owner != nil {
		b.fault(ent, projection.EventFault(e, owner))
	}
	b.tail = append(b.tail, e)
	ent.msgFrom = min(ent.msgFrom, bd.msg)
	ent.stepFrom = min(ent.stepFrom, bd.step)
	ent.callFrom = min(ent.callFrom, bd.call)
	ent.dirty = true
	b.res.Applied++
	return nil
}

// unreadable faults e's session with a message of the log that is not a
// record this build reads (bus.RecordFunc hands it over without a Type).
func (b *batch) unreadable(ent *entry, e event.Event) error {
	_, err := event.DecodeRecord(e.Data, e.Seq)
	if err == nil {
		err = fmt.Errorf("message at %d: no event type: %w", e.Seq, event.ErrMalformed)
	}
	fault := projection.RecordFault(e.Seq, err)
	b.fault(ent, fault)
	return b.reject(ent, e, fault)
}

// fault records f as the fault of ent's session, unless it has one or does
// not exist yet (what comes before its session.created is only rejected:
// there is no row to show it).
func (b *batch) fault(ent *entry, f *projection.Fault) {
	if ent.st.Fault == nil && ent.st.ID != "" {
		ent.st.SetFault(f)
		ent.dirty = true
	}
}

// reject records that e was consumed but not folded.
func (b *batch) reject(ent *entry, e event.Event, cause error) error {
	if _, err := b.exec(b.s.stmts.upsertRejection, e.Session, cause.Error()); err != nil {
		return fmt.Errorf("event %d.%d: %w", e.Seq, e.Index, err)
	}
	if ent != nil {
		ent.rejected++
		ent.dirty = true
	}
	b.problem(e, cause)
	return nil
}

func (b *batch) problem(e event.Event, err error) {
	b.res.Problems = append(b.res.Problems, Problem{Seq: e.Seq, Index: e.Index, Session: e.Session, Type: e.Type, Err: err})
}

// safeApply is projection.Apply, with a panic turned into an error.
func (s *Store) safeApply(st *projection.State, e event.Event, payload any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return s.applyFn(st, e, payload)
}

// applyDecoded folds e, whose payload is decoded already (nil: it did not
// decode, and Apply says why).
func applyDecoded(st *projection.State, e event.Event, payload any) error {
	if payload == nil {
		return projection.Apply(st, e)
	}
	return projection.ApplyDecoded(st, e, payload)
}

// rebuild replaces the state of ent, which a panic may have left half-changed,
// by folding its snapshot and tail again (the events this batch applied
// included: the transaction sees them). The shadows still describe the rows, so marking
// everything as possibly changed makes flush write exactly the differences.
func (b *batch) rebuild(ent *entry) error {
	if err := b.writeTail(nil); err != nil {
		return err
	}
	st, _, n, err := b.s.loadState(b.ctx, b.tx, ent.id)
	if err != nil {
		return err
	}
	b.refolded += n
	ent.st = st
	ent.msgFrom, ent.stepFrom, ent.callFrom = 0, 0, 0
	ent.dirty = true
	return nil
}

// entry returns the session's entry for this batch: touched already, cached, or
// loaded from its snapshot and tail.
func (b *batch) entry(sid string) (*entry, error) {
	if e := b.touched[sid]; e != nil {
		return e, nil
	}
	e := b.s.cache.get(sid)
	if e != nil {
		b.hits++
	} else {
		b.misses++
		st, rejected, n, err := b.s.loadState(b.ctx, b.tx, sid)
		if err != nil {
			return nil, err
		}
		b.refolded += n
		e = newEntry(sid, st)
		e.rejected = rejected
		e.tailed = true // a snapshot of an older build may have left a tail: pruned once
	}
	e.resetBounds()
	b.touched[sid] = e
	b.order = append(b.order, e)
	return e, nil
}

// flush writes the rows of a touched session but its sessions row (run
// writes those first): some at once, those of the tables most written
// gathered with the other sessions' (run writes the rest).
func (b *batch) flush(e *entry) error {
	st := &e.st
	if st.ID == "" {
		// Never created (only rejected events so far): there is no row to write;
		// the rejections are in their table.
		return nil
	}
	if !maps.Equal(e.labels, st.Labels) {
		if err := b.writeLabels(e); err != nil {
			return err
		}
	}
	if err := b.writeMessages(e); err != nil {
		return err
	}
	if err := b.writeSteps(e); err != nil {
		return err
	}
	if err := b.writeCalls(e); err != nil {
		return err
	}
	if err := b.writeArtifacts(e); err != nil {
		return err
	}
	if err := b.writeCheckpoints(e); err != nil {
		return err
	}
	if err := b.writeSnapshot(e); err != nil {
		return err
	}
	e.resetBounds()
	return nil
}

// writeSession adds the session's row to the batch's rows of sessions. Its
// configuration and labels are encoded again only when they changed: they
// rarely do, and the row is written with every batch that touches the
// session.
func (b *batch) writeSession(e *entry) error {
	st := &e.st
	if !e.rowCodec.valid || e.rowCodec.cfg != st.Config {
		raw, err := json.Marshal(st.Config)
		if err != nil {
			return err
		}
		e.rowCodec.cfg, e.rowCodec.cfgJSON = st.Config, string(raw)
	}
	if !e.rowCodec.valid || !maps.Equal(e.rowCodec.labels, st.Labels) || (e.rowCodec.labels == nil) != (st.Labels == nil) {
		raw, err := json.Marshal(st.Labels)
		if err != nil {
			return err
		}
		e.rowCodec.labels, e.rowCodec.labelsJSON = cloneLabels(st.Labels), string(raw)
	}
	if b := budgetSourcesOf(st); !e.rowCodec.valid || e.rowCodec.budget != b {
		raw, err := budgetLimitsJSON(st)
		if err != nil {
			return err
		}
		e.rowCodec.budget, e.rowCodec.budgetJSON = b, raw
	}
	if n := len(st.Definitions); !e.rowCodec.valid || e.rowCodec.defs != n {
		e.rowCodec.defs, e.rowCodec.defsJSON = n, ""
		if n > 0 {
			raw, err := json.Marshal(st.Definitions)
			if err != nil {
				return err
			}
			e.rowCodec.defsJSON = string(raw)
		}
	}
	e.rowCodec.valid = true
	var reached []byte
	if st.LastBudget != nil {
		var err error
		if reached, err = json.Marshal(st.LastBudget); err != nil {
			return err
		}
	}
	var fault []byte
	if st.Fault != nil {
		var err error
		if fault, err = json.Marshal(st.Fault); err != nil {
			return err
		}
	}
	status := st.Status
	if st.Fault != nil {
		status = st.Fault.Status() // whatever was folded after it
	}
	var parent []byte
	var parentSession string
	if st.Parent != nil {
		var err error
		if parent, err = json.Marshal(st.Parent); err != nil {
			return err
		}
		parentSession = st.Parent.Session
	}
	return b.sessions.add(
		st.ID, string(status), st.Turn, e.rowCodec.cfgJSON, st.ForkedFrom, e.rowCodec.labelsJSON,
		int64(st.Epoch), st.Node, title(st.Messages), unixNano(st.CreatedAt), unixNano(st.UpdatedAt),
		int64(st.LastSeq), st.Events, e.rejected, len(st.Messages), len(st.Steps),
		st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CacheReadTokens, st.Summaries, st.Trims,
		st.LastOutput, st.LastError, st.LastCode, string(fault), st.AwaitingApproval, st.Cost.USD, st.Cost.Unpriced,
		e.rowCodec.budgetJSON, string(reached), st.TurnUsage.InputTokens+st.TurnUsage.OutputTokens, st.TurnCost.USD,
		st.TurnTimeMS, st.TimeMS, unixNano(st.TurnRunningSince), string(parent), parentSession, e.rowCodec.defsJSON)
}

// budgetSources are the three sources of a session's limits in force
// (projection.State.BudgetLimits): the node's, the session's and the
// current turn's own.
type budgetSources struct {
	node, session event.Budget
	turn          event.Limits
}

func budgetSourcesOf(st *projection.State) budgetSources {
	b := budgetSources{session: st.Budget, turn: st.TurnBudget}
	if st.Config.Budget != nil {
		b.node = *st.Config.Budget
	}
	return b
}

// budgetLimitsJSON is the budget_limits column of st: its limits in force
// as JSON (their Spent 0: the spend is in columns of its own), empty for
// none.
func budgetLimitsJSON(st *projection.State) (string, error) {
	limits := st.BudgetLimits()
	if len(limits) == 0 {
		return "", nil
	}
	raw, err := json.Marshal(limits)
	return string(raw), err
}

// tailChunk is how many rows of the table tail one statement inserts
// (stmts.insertTailChunk): a statement a row was a third of a step's.
const tailChunk = 16

// writeTail inserts the tail rows of the events folded so far, but for
// those of the sessions in skip (whose snapshot the batch writes), tailChunk
// rows a statement.
func (b *batch) writeTail(skip map[string]bool) error {
	rows := b.tail[:0]
	for _, e := range b.tail {
		if !skip[e.Session] {
			rows = append(rows, e)
			if ent := b.touched[e.Session]; ent != nil {
				ent.tailed = true
			}
		}
	}
	b.tail = b.tail[:0]
	args := make([]any, 0, tailColumns*min(len(rows), tailChunk))
	for len(rows) > 0 {
		st, n := b.s.stmts.insertTail, 1
		if len(rows) >= tailChunk {
			st, n = b.s.stmts.insertTailChunk, tailChunk
		}
		args = args[:0]
		for _, e := range rows[:n] {
			var data any
			if e.Data != nil {
				data = string(e.Data)
			}
			args = append(args, e.Session, int64(e.Seq), e.Index, string(e.Type), formatTime(e.Time), int64(e.Epoch), data)
		}
		if _, err := b.exec(st, args...); err != nil {
			return fmt.Errorf("tail of events %d.%d to %d.%d: %w", rows[0].Seq, rows[0].Index, rows[n-1].Seq, rows[n-1].Index, err)
		}
		b.tailRows += n
		rows = rows[n:]
	}
	return nil
}

// snapshotNow reports whether flush writes e's snapshot: every batch that
// changed the session does (see snapshot).
func (b *batch) snapshotNow(e *entry) bool {
	return e.dirty && e.st.ID != ""
}

// writeSnapshot stores the state when snapshotNow says so, without the
// lists that its rows hold (slimSnapshot).
func (b *batch) writeSnapshot(e *entry) error {
	if !b.snapshotNow(e) {
		return nil
	}
	st := &e.st
	// Encoded into the store's buffer (Apply holds s.mu), which keeps the
	// size of the largest snapshot.
	buf := &b.s.snapBuf
	buf.Reset()
	sn := slimSnapshot(st)
	if err := json.NewEncoder(buf).Encode(&sn); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n")) // Encode's newline: the value is Marshal's
	if err := b.snapshots.add(st.ID, int64(st.LastSeq), string(raw)); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	// The snapshot holds the whole records up to st.LastSeq (a batch holds
	// whole records): their events leave the tail, where a snapshot of an
	// older build or a rebuild in this batch left some.
	if e.tailed {
		if _, err := b.exec(b.s.stmts.pruneTail, st.ID, int64(st.LastSeq)); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		e.tailed = false
	}
	b.snapshotRows++
	return nil
}

func (b *batch) writeLabels(e *entry) error {
	if _, err := b.exec(b.s.stmts.deleteLabels, e.id); err != nil {
		return err
	}
	for k, v := range e.st.Labels {
		if _, err := b.exec(b.s.stmts.insertLabel, e.id, k, v); err != nil {
			return err
		}
	}
	e.labels = cloneLabels(e.st.Labels)
	return nil
}

// writeMessages rewrites the messages from the first one that differs from the
// rows. Messages are keyed by their index, so an insertion (a tool result given
// late, a summary) moves every row after it: the tail from there is rewritten.
// Below msgFrom nothing changed, so the comparison starts there.
func (b *batch) writeMessages(e *entry) error {
	old, cur := e.msgs, e.st.Messages
	from := min(e.msgFrom, len(old), len(cur))
	if b.s.verify {
		if i := firstMessageDiff(old, cur, 0); i < from {
			panic(fmt.Sprintf("store: session %q: message %d changed below the bound %d", e.id, i, from))
		}
	}
	i := firstMessageDiff(old, cur, from)
	if i == len(old) && i == len(cur) {
		return nil
	}
	rows := b.messages
	write := func(j int) error {
		m := &cur[j]
		var calls any
		if len(m.ToolCalls) > 0 {
			raw, err := marshalFast(m.ToolCalls, func(b []byte) ([]byte, bool) { return llm.AppendToolCallsJSON(b, m.ToolCalls) })
			if err != nil {
				return err
			}
			calls = string(raw)
		}
		b.res.MessageRows++
		return rows.add(e.id, j, string(m.Role), orNull(m.Content), calls, orNull(m.ToolCallID), orNull(m.Name),
			m.IsError, projection.IsSummary(*m))
	}
	if len(old) == len(cur) {
		// Changed in place (a new system prompt): only the rows that differ.
		for j := i; j < len(cur); j++ {
			if !messageEqual(&old[j], &cur[j]) {
				if err := write(j); err != nil {
					return err
				}
			}
		}
	} else {
		if i < len(old) {
			if _, err := b.exec(b.s.stmts.deleteMessages, e.id, i); err != nil {
				return err
			}
		}
		for j := i; j < len(cur); j++ {
			if err := write(j); err != nil {
				return err
			}
		}
	}
	e.msgs = append(e.msgs[:i], cur[i:]...)
	return nil
}

// writeSteps writes the steps from stepFrom on that differ from their rows.
// Steps are only ever appended, then updated in place.
func (b *batch) writeSteps(e *entry) error {
	old, cur := e.steps, e.st.Steps
	if len(cur) < len(old) {
		if _, err := b.exec(b.s.stmts.deleteSteps, e.id, len(cur)); err != nil {
			return err
		}
		old = old[:len(cur)]
	}
	from := min(e.stepFrom, len(old))
	if b.s.verify {
		for j := 0; j < from; j++ {
			if !stepEqual(&old[j], &cur[j]) {
				panic(fmt.Sprintf("store: session %q: step %d changed below the bound %d", e.id, j, from))
			}
		}
	}
	rows := b.steps
	for j := from; j < len(cur); j++ {
		fresh := j >= len(old)
		if !fresh && stepEqual(&old[j], &cur[j]) {
			continue
		}
		s := &cur[j]
		var ref, resp any
		if s.RequestRef != nil {
			raw, err := marshalFast(s.RequestRef, s.RequestRef.AppendJSON)
			if err != nil {
				return err
			}
			ref = string(raw)
		}
		if s.Response != nil {
			raw, err := marshalFast(s.Response, s.Response.AppendJSON)
			if err != nil {
				return err
			}
			resp = string(raw)
		}
		trim, err := jsonOrNil(s.Trim)
		if err != nil {
			return err
		}
		art, err := jsonOrNil(s.Artifact)
		if err != nil {
			return err
		}
		var input any
		if len(s.Input) > 0 {
			input = string(s.Input)
		}
		var in, out int
		if s.Response != nil {
			in, out = s.Response.Usage.InputTokens, s.Response.Usage.OutputTokens
		}
		var costUSD any // NULL: no cost recorded
		var unpriced int
		if s.Cost != nil {
			costUSD, unpriced = s.Cost.USD, s.Cost.Unpriced
		}
		if err := rows.add(e.id, j, s.ID, string(s.Type), s.Turn, string(s.Status),
			orNull(s.Tool), orNull(s.CallID), input, orNull(s.Output), s.Idempotent, art, ref, resp, trim, orNull(s.Content),
			orNull(s.Error), orNull(s.Code), int64(s.StartSeq), int64(s.EndSeq), unixNano(s.StartedAt), unixNano(s.EndedAt),
			s.DurationMS, in, out, s.Compaction, costUSD, unpriced, orNull(s.Child)); err != nil {
			return err
		}
		b.stepRows++
		if fresh {
			old = append(old, *s)
		} else {
			old[j] = *s
		}
	}
	e.steps = old
	return nil
}

// writeCalls writes the tool-call records from callFrom on that differ from
// their rows. Records are appended, then updated in place.
func (b *batch) writeCalls(e *entry) error {
	old, cur := e.calls, e.st.ToolCalls
	if len(cur) < len(old) {
		if _, err := b.exec(b.s.stmts.deleteCalls, e.id, len(cur)); err != nil {
			return err
		}
		old = old[:len(cur)]
	}
	from := min(e.callFrom, len(old))
	if b.s.verify {
		for j := 0; j < from; j++ {
			if !callEqual(&old[j], &cur[j]) {
				panic(fmt.Sprintf("store: session %q: tool call %d changed below the bound %d", e.id, j, from))
			}
		}
	}
	rows := b.calls
	for j := from; j < len(cur); j++ {
		fresh := j >= len(old)
		if !fresh && callEqual(&old[j], &cur[j]) {
			continue
		}
		c := &cur[j]
		var args any
		if len(c.Arguments) > 0 {
			args = string(c.Arguments)
		}
		if err := rows.add(e.id, j, c.CallID, orNull(c.Name), args, c.Turn, orNull(c.StepID),
			string(c.Status), c.IsError, orNull(c.Code), c.HasResult); err != nil {
			return err
		}
		b.callRows++
		if fresh {
			old = append(old, *c)
		} else {
			old[j] = *c
		}
	}
	e.calls = old
	return nil
}

// writeArtifacts inserts the artifacts added since the last flush (they are
// only ever appended).
func (b *batch) writeArtifacts(e *entry) error {
	cur := e.st.Artifacts
	if len(cur) < e.arts {
		if _, err := b.exec(b.s.stmts.deleteArtifacts, e.id, len(cur)); err != nil {
			return err
		}
		e.arts = len(cur)
	}
	for j := e.arts; j < len(cur); j++ {
		a := &cur[j]
		if _, err := b.exec(b.s.stmts.upsertArtifact, e.id, j, a.ID, a.Name, a.StepID, a.CallID,
			a.ContentType, a.Ref.Bucket, a.Ref.Object, a.Ref.Size, a.Ref.SHA256, int64(a.Seq)); err != nil {
			return err
		}
	}
	e.arts = len(cur)
	return nil
}

// writeCheckpoints inserts the checkpoints added since the last flush.
func (b *batch) writeCheckpoints(e *entry) error {
	cur := e.st.Checkpoints
	if len(cur) < e.checks {
		if _, err := b.exec(b.s.stmts.deleteCheckpoints, e.id, len(cur)); err != nil {
			return err
		}
		e.checks = len(cur)
	}
	for j := e.checks; j < len(cur); j++ {
		c := &cur[j]
		if _, err := b.exec(b.s.stmts.upsertCheckpoint, e.id, j, c.ID, int64(c.UpToSeq),
			c.Bucket, c.Key, c.Events, int64(c.Seq)); err != nil {
			return err
		}
	}
	e.checks = len(cur)
	return nil
}

// count adds a committed batch to the store's counters.
func (b *batch) count() {
	c := &b.s.stats
	c.batches.Add(1)
	c.applied.Add(int64(b.res.Applied))
	c.skipped.Add(int64(b.res.Skipped))
	c.rejected.Add(int64(len(b.res.Problems)))
	c.messageRows.Add(int64(b.res.MessageRows))
	c.stepRows.Add(int64(b.stepRows))
	c.toolCallRows.Add(int64(b.callRows))
	c.snapshots.Add(int64(b.snapshotRows))
	c.tailRows.Add(int64(b.tailRows))
	c.cacheHits.Add(int64(b.hits))
	c.cacheMisses.Add(int64(b.misses))
	c.refolded.Add(int64(b.refolded))
	c.statements.Add(int64(b.statements))
}

// marshalFast is json.Marshal(v), written by appendJSON (an AppendJSON
// method of v's, which writes the same bytes without reflection: the steps'
// and messages' rows are written at every step) unless it leaves v to
// Marshal.
func marshalFast(v any, appendJSON func([]byte) ([]byte, bool)) ([]byte, error) {
	if b, ok := appendJSON(nil); ok {
		return b, nil
	}
	return json.Marshal(v)
}

// orNull is s as the value of a column that its upsert writes through
// coalesce with the empty string: NULL for an empty string, which binds with
// no copy (see the upserts in stmts.go).
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonOrNil[T any](v *T) (any, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(raw), nil
}

// rowWriter gathers the rows of one upsert and writes them rowChunk at a
// time, the rest in one statement at the end: a statement a row spent
// more in the driver than SQLite spent on the row. The rows of one writer
// have distinct keys (an upsert of several rows cannot change one row
// twice): a batch writes each row of a session once, and a row that a
// session deletes (deleteMessages...) is deleted before the rows that
// replace it are added.
type rowWriter struct {
	b     *batch
	byN   []*sql.Stmt // the upsert of n rows at index n
	width int         // values a row, known at the first row
	args  []any
}

// rows is a writer of the rows of the upserts byN (stmts.upsertSteps...),
// bound to the batch's transaction when used.
func (b *batch) rows(byN []*sql.Stmt) *rowWriter {
	return &rowWriter{b: b, byN: byN}
}

// add adds a row, and writes rowChunk of them once it has them.
func (w *rowWriter) add(row ...any) error {
	if w.width == 0 {
		w.width = len(row)
		w.args = make([]any, 0, rowChunk*w.width)
	}
	w.args = append(w.args, row...)
	if len(w.args) < rowChunk*w.width {
		return nil
	}
	return w.flush()
}

// flush writes the rows not written yet.
func (w *rowWriter) flush() error {
	if len(w.args) == 0 {
		return nil
	}
	_, err := w.b.exec(w.byN[len(w.args)/w.width], w.args...)
	w.args = w.args[:0]
	return err
}
