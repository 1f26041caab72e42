package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Errors of this package. Each method's doc names the ones it returns; they are
// wrapped with context, so test them with errors.Is.
var (
	// ErrNotFound: no session with that id is in the read model (it may not have
	// been projected yet: the read model follows the log).
	ErrNotFound = errors.New("session not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrNewerSchema: the database was written by a newer version of TAH. The read
	// model can always be rebuilt from the log, so deleting the file is safe.
	ErrNewerSchema = errors.New("read model schema is newer than this build")
	// ErrInvalidCursor: a ListOptions.Before that no ListSessions returned.
	ErrInvalidCursor = errors.New("invalid list cursor")
	// ErrDamaged: the database file is damaged: it is not a SQLite database,
	// or its integrity check (at Open, and by Check) fails. The read model is
	// a cache of the log: move the file aside (MoveAside, or Reset on an open
	// Store) and the projector rebuilds it. IsDamaged also recognises
	// SQLite's own errors of a damaged file.
	ErrDamaged = errors.New("read model damaged")
	// ErrReadOnly: the database file (or its directory) cannot be written:
	// its permissions, an immutable attribute, a read-only mount. IsReadOnly
	// also recognises SQLite's own errors of an unwritable file.
	ErrReadOnly = errors.New("read model not writable")

	// ErrNoSequence is a Problem: an event without a stream sequence cannot be
	// placed in the log, so it is not applied.
	ErrNoSequence = errors.New("event has no stream sequence")
	// ErrShardCount: the read model holds positions in shards the log does not
	// have (Options.Shards): it was built from another log. Delete it so that
	// the projector rebuilds it from this one.
	ErrShardCount = errors.New("read model of a log with another shard count")
	// ErrPanic is a Problem: folding the event panicked. The event is kept and
	// reported like any rejected event and the session's state is rebuilt.
	ErrPanic = errors.New("folding the event panicked")
)

// Options tunes a Store. The zero value is the default for every field.
type Options struct {
	// Consumer names the positions that Apply advances (see Positions).
	// Default DefaultConsumer.
	Consumer string
	// Shards is the number of shards of the log the store is fed from
	// (bus.Bus.Shards): Apply keeps a position per shard. Default 1.
	Shards int
	// CacheSize is how many folded session states Apply keeps in memory, least
	// recently used out first. A session missing from the cache is loaded from its
	// snapshot and its rows, so this only bounds memory and speed:
	// set it above the number of sessions active at once. Default 2048 (a few
	// kilobytes to a few hundred each, by the length of their histories).
	// SQLite's page cache of the writer follows it (PageCacheKB).
	CacheSize int
	// Readers is the size of the read connection pool. Default 4.
	Readers int
	// DeferCheck leaves SQLite's integrity check out of Open, unless a
	// migration is due (a migration must not build on a damaged file): the
	// caller runs Check once the store is open, beside its work (the node's
	// projector does, in the background). The check reads the whole file,
	// about 2 s for 500 MB: at Open it held up a node's start by as much.
	DeferCheck bool
}

// PageCacheKB is the size of the writer's SQLite page cache for a state
// cache of sessions sessions (Options.CacheSize): 8 KiB a session (the
// leaves of its rows in each table a batch writes), at least 8 MiB, at most
// 256 MiB. With SQLite's default (2 MiB) a batch of a few hundred sessions
// read most of its pages again from the file, and spilled its dirty pages
// to the WAL before its commit.
func PageCacheKB(sessions int) int {
	return min(max(8*sessions, 8<<10), 256<<10)
}

// walAutocheckpoint is the WAL's size, in pages, at which a commit copies
// it back into the database (SQLite's wal_autocheckpoint; its default is
// 1000). A batch of a few hundred sessions writes hundreds of pages, so at
// 1000 a checkpoint came every other batch, writing the same hot pages
// (and an fsync) each time; at 4096 (16 MiB of WAL) they are written once
// for several batches.
const walAutocheckpoint = 4096

// DefaultConsumer is the name of the positions Apply advances when
// Options.Consumer is empty.
const DefaultConsumer = "projector"

func (o Options) withDefaults() Options {
	if o.Consumer == "" {
		o.Consumer = DefaultConsumer
	}
	if o.Shards <= 0 {
		o.Shards = 1
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 2048
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	return o
}

// Store is the SQLite read model. Its methods are safe for concurrent use; Apply
// calls are serialised (there is one writer), reads run in parallel with them on
// a separate pool and see only committed batches.
type Store struct {
	path string
	opts Options
	w    *sql.DB  // one connection: SQLite has one writer anyway, and the cache relies on it
	r    *readers // read pool, query_only; Reset replaces its database

	// mu serialises Apply (and Reset) and guards w, cache and the prepared
	// statements' use.
	mu    sync.Mutex
	cache *lru
	stmts *stmts
	// pos are the positions of opts.Consumer as committed, nil until read:
	// only Apply writes them, so a batch starts from them instead of
	// reading them again (a query in every batch).
	pos []uint64
	// snapBuf is where Apply encodes snapshots.
	snapBuf bytes.Buffer

	// readDSN opens a read-only connection to the file: Check's own, so
	// that it neither holds a reader of the pool for seconds nor fills
	// their page caches (a read that meets damage on disk asks for a
	// rebuild; one served from a cache would not).
	readDSN string
	// unchecked: Open left the integrity check to the caller
	// (Options.DeferCheck; Unchecked), and no Check has passed since.
	unchecked atomic.Bool

	closed atomic.Bool
	// broken is why the store cannot be used any more (a Reset that could
	// not open a new file), nil while it can.
	broken atomic.Pointer[error]
	// generation counts the Resets: an error seen before one is not the
	// new file's (Generation).
	generation atomic.Uint64
	stats      statsCounters

	// For tests: the fold (projection.Apply in production), a hook after the
	// i-th event of a batch inside its transaction (nil in production), and
	// checking the change bounds against full comparisons (off in production).
	applyFn    func(*projection.State, event.Event, any) error
	afterEvent func(i int) error
	// afterStatement is called after the n-th statement of a batch (nil in
	// production).
	afterStatement func(n int) error
	verify         bool
}

// Open opens (creating it and its directory if needed) the read model at path
// and brings its schema up to date. It fails with ErrNewerSchema when the file
// was written by a newer version, ErrDamaged when it is damaged (see Check),
// ErrReadOnly when it cannot be written.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{path: abs, opts: opts.withDefaults(), applyFn: applyDecoded}
	h, err := openFile(ctx, abs, s.opts)
	if err != nil {
		return nil, err
	}
	s.w, s.r, s.stmts = h.w, &readers{db: h.r}, h.stmts
	s.cache = newLRU(s.opts.CacheSize)
	s.unchecked.Store(!h.checked)
	s.readDSN = h.readDSN
	return s, nil
}

// handles are an open database file's connections.
type handles struct {
	w, r  *sql.DB
	stmts *stmts
	// checked: openFile ran the integrity check.
	checked bool
	// readDSN opens a read-only connection to the file (Check's).
	readDSN string
}

// openFile opens the database at abs: its integrity checked, its schema
// brought up to date, its writability tried, its statements prepared.
func openFile(ctx context.Context, abs string, opts Options) (*handles, error) {
	// WAL lets readers run beside the writer; synchronous=NORMAL is durable
	// against a crash of the process and may lose the last commits on power loss,
	// which is harmless here: the position is committed with the rows, so the
	// projector simply consumes those events again. _txlock=immediate takes the
	// write lock at BEGIN, so a transaction never fails half-way on a lock upgrade.
	// temp_store=memory keeps the statement journals (which SQLite writes for
	// a statement of several rows, to undo it alone) in memory: past 64 KiB
	// one went to a temporary file, and every later statement of the
	// transaction wrote its pages there, a system call each (a fifth of a
	// batch's CPU). The page cache and the checkpoints: PageCacheKB,
	// walAutocheckpoint.
	base := "file:" + escapePath(abs) + "?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
	w, err := sql.Open("sqlite", base+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=temp_store(memory)"+
		fmt.Sprintf("&_pragma=cache_size(-%d)&_pragma=wal_autocheckpoint(%d)", PageCacheKB(opts.CacheSize), walAutocheckpoint)+
		"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	h := &handles{w: w}
	fail := func(err error) (*handles, error) {
		h.close()
		return nil, diagnose(abs, err)
	}
	// The check before anything writes: a migration must not build on a
	// damaged file. Deferred (Options.DeferCheck), it runs here only when a
	// migration is due.
	checkNow := !opts.DeferCheck
	if !checkNow {
		due, err := migrationDue(ctx, w)
		if err != nil {
			return fail(err)
		}
		checkNow = due
	}
	if checkNow {
		if err := check(ctx, w); err != nil {
			return fail(err)
		}
	}
	h.checked = checkNow
	if err := migrate(ctx, w); err != nil {
		return fail(err)
	}
	if err := tryWrite(ctx, w); err != nil {
		return fail(err)
	}
	h.readDSN = base + "&_query_only=1"
	if h.r, err = sql.Open("sqlite", h.readDSN); err != nil {
		return fail(fmt.Errorf("open: %w", err))
	}
	h.r.SetMaxOpenConns(opts.Readers)
	h.r.SetMaxIdleConns(opts.Readers)
	if err := h.r.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("open: %w", err))
	}
	if h.stmts, err = prepare(ctx, w); err != nil {
		return fail(err)
	}
	return h, nil
}

func (h *handles) close() error {
	var errs []error
	if h.stmts != nil {
		errs = append(errs, h.stmts.close())
	}
	if h.r != nil {
		errs = append(errs, h.r.Close())
	}
	if h.w != nil {
		errs = append(errs, h.w.Close())
	}
	return errors.Join(errs...)
}

// escapePath makes a file path safe inside a "file:" URI, whose query string
// carries the pragmas.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(p))
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. It waits for an Apply in progress to finish; later
// calls of any method fail with ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.stmts != nil {
		errs = append(errs, s.stmts.close())
	}
	if s.r != nil {
		errs = append(errs, s.r.close())
	}
	if s.w != nil {
		// optimize keeps the planner's statistics fresh for the list indexes; cheap
		// when there is nothing to do.
		_, _ = s.w.Exec("PRAGMA optimize")
		errs = append(errs, s.w.Close())
	}
	s.cache = nil
	return errors.Join(errs...)
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.broken.Load(); err != nil {
		return *err
	}
	return nil
}

// Stats are cumulative counters since Open, for metrics and tests.
type Stats struct {
	Batches  int64 // Apply calls committed
	Applied  int64 // events folded
	Skipped  int64 // redeliveries ignored
	Rejected int64 // events consumed but not folded (Problems)
	// MessageRows, StepRows and ToolCallRows count rows written (inserted or
	// rewritten): they grow with what changed, not with the size of the history.
	MessageRows  int64
	StepRows     int64
	ToolCallRows int64
	Snapshots    int64 // state snapshots written
	// TailRows counts the events written to the tail (those a snapshot
	// written in the same batch holds are not).
	TailRows    int64
	CacheHits   int64
	CacheMisses int64
	// Refolded counts events folded again to load a state missing from the cache
	// (the tail after its snapshot).
	Refolded int64
	// Statements counts the SQL statements the committed batches wrote
	// with: the rows of several sessions share one where they can.
	Statements int64
}

type statsCounters struct {
	batches, applied, skipped, rejected            atomic.Int64
	messageRows, stepRows, toolCallRows, snapshots atomic.Int64
	cacheHits, cacheMisses, refolded, tailRows     atomic.Int64
	statements                                     atomic.Int64
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Batches: c.batches.Load(), Applied: c.applied.Load(), Skipped: c.skipped.Load(), Rejected: c.rejected.Load(),
		MessageRows: c.messageRows.Load(), StepRows: c.stepRows.Load(), ToolCallRows: c.toolCallRows.Load(),
		Snapshots: c.snapshots.Load(), CacheHits: c.cacheHits.Load(), CacheMisses: c.cacheMisses.Load(),
		Refolded: c.refolded.Load(), TailRows: c.tailRows.Load(), Statements: c.statements.Load(),
	}
}
