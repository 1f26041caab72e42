package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// A damaged or unwritable file. The read model is a cache of the log, so the
// cure of a damaged file is always the same: set it aside and fold the log
// again. An unwritable one is a person's doing (permissions, an immutable
// attribute, a read-only mount): it is reported, never worked around.

// checkErrors is how many problems the integrity check lists at most: the
// first few say enough, and the check stops early on a badly damaged file.
const checkErrors = 5

// check runs SQLite's quick_check on db: the structure of every page and
// b-tree, without the cross-checks of indexes against their tables that
// integrity_check adds. It reads the whole file once: about 2 s for 500 MB
// (measured, warm page cache), where integrity_check takes 5 s.
func check(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) error {
	rows, err := db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", checkErrors))
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check: %s: %w", strings.Join(problems, "; "), ErrDamaged)
	}
	return nil
}

// tryWrite writes the schema version again, in a transaction of its own: a
// file SQLite had to open read-only (its permissions, an immutable attribute,
// a read-only mount) fails here, at Open, rather than at the first batch the
// projector applies.
func tryWrite(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write test: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion())); err != nil {
		return fmt.Errorf("write test: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write test: %w", err)
	}
	return nil
}

// diagnose is err of opening the file at path, marked ErrDamaged or
// ErrReadOnly when it is one, with what to do about it.
func diagnose(path string, err error) error {
	switch {
	case IsDamaged(err):
		if !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("%w: %w", err, ErrDamaged)
		}
		return fmt.Errorf("store: the read model %s is damaged (%w); move it aside or delete it: it is rebuilt from the log", path, err)
	case IsReadOnly(err):
		if !errors.Is(err, ErrReadOnly) {
			err = fmt.Errorf("%w: %w", err, ErrReadOnly)
		}
		return fmt.Errorf("store: the read model %s cannot be written (%w); make it and its directory writable by this user "+
			"(ls -l; lsattr, chattr -i; a read-only mount), or delete it: it is rebuilt from the log", path, err)
	}
	return fmt.Errorf("store: %s: %w", path, err)
}

// sqliteCode is the primary SQLite result code of err, 0 for none.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// IsDamaged reports whether err says that the database file is damaged:
// ErrDamaged, or SQLite's SQLITE_CORRUPT and SQLITE_NOTADB. The cure is Reset
// (or MoveAside before Open), and the log folded again.
func IsDamaged(err error) bool {
	if errors.Is(err, ErrDamaged) {
		return true
	}
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// IsReadOnly reports whether err says that the database file cannot be
// written or opened for writing: ErrReadOnly, or SQLite's SQLITE_READONLY,
// SQLITE_PERM and SQLITE_CANTOPEN. A person must fix it (or delete the file).
func IsReadOnly(err error) bool {
	if errors.Is(err, ErrReadOnly) {
		return true
	}
	switch sqliteCode(err) {
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// IsIOError reports whether err is SQLite's SQLITE_IOERR: the system failed
// a read or write of the file (a failing disk, a file system made read-only
// under it). A full disk is not one: that is SQLITE_FULL, which passes.
func IsIOError(err error) bool { return sqliteCode(err) == sqlite3.SQLITE_IOERR }

// MoveAside renames the database file at path, with its write-ahead log, to
// path.damaged-<UTC time> (and its -wal), for inspection, and removes its
// shared-memory index, so that the next Open starts an empty read model. It
// returns the new name; "" when there was no file.
func MoveAside(path string) (string, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	aside := path + ".damaged-" + time.Now().UTC().Format("20060102T150405.000Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("store: moving the read model aside: %w", err)
	}
	if err := os.Rename(path+"-wal", aside+"-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return aside, fmt.Errorf("store: moving the read model's log aside: %w", err)
	}
	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return aside, fmt.Errorf("store: removing the read model's index: %w", err)
	}
	return aside, nil
}

// Check runs the integrity check of Open on the open database: ErrDamaged
// when it fails.
func (s *Store) Check(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	gen := s.Generation()
	db, err := sql.Open("sqlite", s.readDSN) // the same file after a Reset
	if err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := check(ctx, db); err != nil {
		return diagnose(s.path, err)
	}
	if gen == s.Generation() {
		s.unchecked.Store(false)
	}
	return nil
}

// Unchecked reports whether Open left the integrity check of the file to
// the caller (Options.DeferCheck, no migration due) and no Check has passed
// since: run Check. A file made by Reset is new, so checked.
func (s *Store) Unchecked() bool { return s.unchecked.Load() }

// Generation counts the Resets of the store: an error met by a read that
// started at another generation was not the current file's.
func (s *Store) Generation() uint64 { return s.generation.Load() }

// Reset starts the read model over on a new, empty file at the same path:
// the current one (damaged, say) is moved aside (MoveAside) and its name
// returned. Positions are 0 afterwards: the caller folds the whole log
// again. Reads wait while it runs; those in progress finish on the old
// file. When no new file can be opened, every later call fails with that
// error.
func (s *Store) Reset(ctx context.Context) (aside string, err error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return "", ErrClosed
	}
	// A Reset that failed before may succeed now (a directory made
	// writable again).
	s.broken.Store(nil)
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	old := &handles{w: s.w, r: s.r.db, stmts: s.stmts}
	s.stmts = nil
	_ = old.close() // a damaged file may fail its last checkpoint
	s.cache, s.pos = newLRU(s.opts.CacheSize), nil
	s.generation.Add(1)
	broken := func(err error) (string, error) {
		s.broken.Store(&err)
		return aside, err
	}
	if aside, err = MoveAside(s.path); err != nil {
		return broken(err)
	}
	h, err := openFile(ctx, s.path, s.opts)
	if err != nil {
		return broken(err)
	}
	s.w, s.r.db, s.stmts = h.w, h.r, h.stmts
	s.unchecked.Store(!h.checked)
	return aside, nil
}

// readers is the read pool. Reset replaces its database while reads may
// run: a call takes the one in place when it starts.
type readers struct {
	mu sync.RWMutex
	db *sql.DB
	// observe, set by tests before any read, is told every read's SQL and
	// arguments, those of read transactions too (observed): the plans of
	// them all are checked (TestReadsUseIndexes).
	observe func(query string, args []any)
}

func (p *readers) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.observe != nil {
		p.observe(query, args)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p *readers) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.observe != nil {
		p.observe(query, args)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// observed is q, whose reads observe is told of when it is set.
func (p *readers) observed(q querier) querier {
	if p.observe == nil {
		return q
	}
	return observedQuerier{q, p.observe}
}

type observedQuerier struct {
	q       querier
	observe func(query string, args []any)
}

func (o observedQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	o.observe(query, args)
	return o.q.QueryContext(ctx, query, args...)
}

func (o observedQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	o.observe(query, args)
	return o.q.QueryRowContext(ctx, query, args...)
}

func (p *readers) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.db.BeginTx(ctx, opts)
}

func (p *readers) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.db.Close()
}
