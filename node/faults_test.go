package node

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/testfs"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// faultNode is a node on data directory dir with its API, and an admin client
// of it, for the faults below. stop closes it (once; the cleanup does too).
type faultNode struct {
	t      *testing.T
	n      *Node
	c      *client.Client
	ctx    context.Context
	closed bool
}

func startFaultNode(t *testing.T, dir string, log *slog.Logger) *faultNode {
	t.Helper()
	return startFaultNodeAt(t, dir, "", log)
}

// startFaultNodeAt is startFaultNode with the read model at storePath.
func startFaultNodeAt(t *testing.T, dir, storePath string, log *slog.Logger) *faultNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n, err := Start(ctx, Options{Bus: cfg, StorePath: storePath, Provider: mock.Scripted(mock.Say("fine").Always()), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	f := &faultNode{t: t, n: n, ctx: ctx}
	t.Cleanup(f.stop)
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if f.c, err = client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir), RequestTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *faultNode) stop() {
	if f.closed {
		return
	}
	f.closed = true
	if f.c != nil {
		f.c.Close()
	}
	if err := f.n.Close(context.Background()); err != nil {
		f.t.Errorf("close: %v", err)
	}
}

// turn runs one turn of sid within d, and returns how it ended.
func (f *faultNode) turn(sid string, d time.Duration) (projection.Status, error) {
	ctx, cancel := context.WithTimeout(f.ctx, d)
	defer cancel()
	turn, err := f.c.Run(ctx, sid, wire.Input{Text: "hello"})
	if err != nil {
		return "", err
	}
	defer turn.Close()
	out, err := turn.Outcome(ctx)
	return out.Status, err
}

func (f *faultNode) completes(sid string) {
	f.t.Helper()
	if st, err := f.turn(sid, time.Minute); err != nil || st != projection.StatusCompleted {
		f.t.Fatalf("a turn of %s: %s, %v", sid, st, err)
	}
}

func (f *faultNode) create() string {
	f.t.Helper()
	s, err := f.c.Create(f.ctx, wire.CreateRequest{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s.Session
}

// healthz is the status code and body of the node's /healthz.
func (f *faultNode) healthz() (int, string) {
	rec := httptest.NewRecorder()
	f.n.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// tmpfs mounts a tmpfs of size on a new directory, unmounted at the end of
// the test: a disk that fills for real. It needs root (CI runs as root).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a small disk that fills needs a tmpfs, which needs root (uid %d): mount: %v %s", os.Geteuid(), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the disk is full, and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling the disk: %v", err)
			}
			return path
		}
	}
}

// A full disk under a node's data directory (its JetStream store and its
// read model) makes the node say so in /healthz once a write fails, and the
// node comes back by itself when space is freed: it restarts JetStream (whose
// streams refuse every write after a failed one, until reloaded), and runs
// turns again, old sessions and new.
func TestFullDiskIsReportedAndOutlived(t *testing.T) {
	t.Parallel()
	dir := tmpfs(t, "32m")
	f := startFaultNode(t, dir, nil)
	sid := f.create()
	f.completes(sid)
	if code, body := f.healthz(); code != 200 {
		t.Fatalf("healthz before the disk is full: %d %s", code, body)
	}

	space := fill(t, dir)
	// The node writes all the time (its presence, every second); inputs make
	// it write more.
	err := natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
		if err := f.n.bus.StoreErr(); err != nil {
			return nil
		}
		_, _ = f.turn(sid, time.Second)
		return errors.New("no write failed yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	code, body := f.healthz()
	if code != 503 || !strings.Contains(body, "JetStream store not writable") || !strings.Contains(body, "no space left on device") {
		t.Fatalf("healthz on a full disk: %d %s", code, body)
	}
	if err := f.n.Health(f.ctx); !errors.Is(err, bus.ErrStoreNotWritable) {
		t.Fatalf("Health on a full disk: %v", err)
	}

	if err := os.Remove(space); err != nil {
		t.Fatal(err)
	}
	err = natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
		if code, body := f.healthz(); code != 200 {
			return fmt.Errorf("healthz: %d %s", code, body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after space came back: %v", err)
	}
	if f.n.bus.StoreRestarts() < 1 {
		t.Errorf("healthy again without a JetStream restart")
	}
	f.completes(sid)
	f.completes(f.create())
}

// A read model that waits (here on a lock another process holds) while the
// log goes on fills the projector's queue, and the tail then waits to hand a
// record over: Close still returns (it used to wait for the tail, which waited
// for the projector, which waited for Close).
func TestStalledReadModelDoesNotHoldUpClose(t *testing.T) {
	// Not t.Parallel: it sets a package variable every node reads.
	defer func(q int) { projectorQueue = q }(projectorQueue)
	projectorQueue = 2
	f := startFaultNode(t, t.TempDir(), nil)
	sid := f.create()
	f.completes(sid)

	lock, err := sql.Open("sqlite", "file:"+f.n.store.Path()+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tx, err := lock.Begin() // the write lock, until the end of the test
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	p := f.n.projector()
	err = natstest.Poll(time.Minute, 10*time.Millisecond, func() error {
		if len(p.ch) == cap(p.ch) {
			return nil
		}
		f.completes(sid)
		return fmt.Errorf("the projector's queue holds %d of %d records", len(p.ch), cap(p.ch))
	})
	if err != nil {
		t.Fatal(err)
	}
	f.completes(sid) // its records wait at the tail now

	closed := make(chan error, 1)
	go func() { f.closed = true; closed <- f.n.Close(context.Background()) }() // owned here: waited for below
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(time.Minute): // a deadline to catch the hang, not a measure
		t.Fatal("Close did not return with the read model stalled")
	}
}

// sessions makes n sessions with one turn each and waits until the read
// model has them.
func (f *faultNode) sessions(n int) []string {
	f.t.Helper()
	var sids []string
	for range n {
		sid := f.create()
		f.completes(sid)
		sids = append(sids, sid)
	}
	for _, sid := range sids {
		last, err := f.n.bus.LastSeq(f.ctx, sid)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := f.n.projector().WaitFor(f.ctx, sid, last); err != nil {
			f.t.Fatal(err)
		}
	}
	return sids
}

// shows fails the test unless get and messages of every session succeed,
// and show its turn once the read model has caught up with its log (messages
// waits for that; get answers from the read model as it is).
func (f *faultNode) shows(sids []string) {
	f.t.Helper()
	for _, sid := range sids {
		if _, err := f.c.Get(f.ctx, sid); err != nil {
			f.t.Errorf("get %s: %v", sid, err)
		}
		if msgs, err := f.c.Messages(f.ctx, sid); err != nil || len(msgs.Messages) < 2 {
			f.t.Errorf("messages of %s: %d, %v", sid, len(msgs.Messages), err)
		}
		if got, err := f.c.Get(f.ctx, sid); err != nil || got.Turn < 1 {
			f.t.Errorf("get %s after its messages: turn %d, %v", sid, got.Turn, err)
		}
	}
}

// damage overwrites the pages of the database file at path from its second
// one on (from its middle when middle), keeping its header: SQLite opens it,
// and finds garbage where rows were.
func damage(t *testing.T, path string, middle bool) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := fi.Size() / page
	from, to := int64(1), pages
	if middle {
		from, to = pages/3, 2*pages/3
	}
	if to-from < 2 {
		t.Fatalf("%s has %d pages: too small to damage", path, pages)
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	garbage := []byte(strings.Repeat("garbage!", page/8))
	for p := from; p < to; p++ {
		if _, err := fh.WriteAt(garbage, p*page); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
}

// damagedFiles are the read models set aside in dir.
func damagedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "data.db.damaged-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range m {
		if !strings.HasSuffix(p, "-wal") {
			out = append(out, p)
		}
	}
	return out
}

// Garbage in the middle of data.db (its header intact: SQLite opens it) is
// found at start, by the first read that meets it or by the integrity check
// the projector runs beside its work (store.Options.DeferCheck): the file is
// set aside and the read model rebuilt from the log, so that every session
// shows (they failed before: "database disk image is malformed").
func TestDamagedReadModelIsRebuiltAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := startFaultNode(t, dir, nil)
	sids := f.sessions(22)
	f.stop()
	damage(t, filepath.Join(dir, "data.db"), true)

	var logged strings.Builder
	f = startFaultNode(t, dir, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	f.shows(sids)
	if got := damagedFiles(t, dir); len(got) != 1 {
		t.Errorf("damaged files set aside: %v", got)
	}
	if !strings.Contains(logged.String(), "set aside, rebuilding it from the log") {
		t.Errorf("the log does not say what happened:\n%s", logged.String())
	}
	if code, body := f.healthz(); code != 200 {
		t.Errorf("healthz: %d %s", code, body)
	}
}

// A read model damaged while the node runs is found by the first read that
// meets the damage: the node checks it, sets it aside and rebuilds it from
// the log, and the reads succeed again (they failed for good before).
func TestDamagedReadModelIsRebuiltWhileRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := startFaultNode(t, dir, nil)
	sids := f.sessions(22)
	f.stop()
	// Started again, its read connections have read nothing yet: they meet
	// the damage on disk.
	f = startFaultNode(t, dir, nil)
	damage(t, filepath.Join(dir, "data.db"), false)

	err := natstest.Poll(time.Minute, 50*time.Millisecond, func() error {
		for _, sid := range sids {
			if _, err := f.c.Messages(f.ctx, sid); err != nil {
				return err
			}
			if _, err := f.c.Get(f.ctx, sid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reads after the damage: %v", err)
	}
	if f.n.projector().Rebuilds() != 1 || len(damagedFiles(t, dir)) != 1 {
		t.Fatalf("%d rebuilds, %v set aside; want 1", f.n.projector().Rebuilds(), damagedFiles(t, dir))
	}
	f.shows(sids)
	f.completes(sids[0])
}

// A read model the node cannot write is refused at start, with the file and
// what to do: it used to start, its projector retrying for ever.
func TestReadOnlyReadModelIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := startFaultNode(t, dir, nil)
	f.sessions(1)
	f.stop()
	path := filepath.Join(dir, "data.db")
	testfs.ReadOnly(t, path)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(context.Background(), Options{Bus: cfg, Provider: mock.Scripted(mock.Say("fine").Always()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		n.Close(context.Background())
		t.Fatal("a node started on a read-only read model")
	}
	if !errors.Is(err, store.ErrReadOnly) || !strings.Contains(err.Error(), path) {
		t.Fatalf("start on a read-only read model: %v", err)
	}
}

// immutable sets (or with off, clears) the immutable attribute of the files
// of the read model at path (it, its write-ahead log, and those set aside):
// even open, they take no write, and no rename. It needs root (CI runs as
// root): permission bits do not stop root, nor an open file.
func immutable(t *testing.T, path string, on bool) {
	t.Helper()
	files, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	flag := "+i"
	if !on {
		flag = "-i"
	}
	for _, file := range files {
		if strings.HasSuffix(file, "-shm") {
			continue // the readers' shared memory, rebuilt from the others
		}
		if out, err := exec.Command("chattr", flag, file).CombinedOutput(); err != nil {
			t.Skipf("a file that takes no write needs chattr %s as root (uid %d): %v %s", flag, os.Geteuid(), err, out)
		}
	}
}

// A read model whose files stop taking writes under the running node: its
// batches fail, and after a few it is set aside; since it cannot be moved
// either, the node says it cannot go on (Failed: tah-node exits, so that a
// supervisor starts it again), unhealthy meanwhile. Writable again, the read
// model is set aside and rebuilt from the log, and the node is healthy. It
// used to retry for ever, healthy.
func TestUnwritableReadModelStopsTheNodeOrIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "data.db")
	f := startFaultNode(t, dir, nil)
	sids := f.sessions(1)
	immutable(t, path, true)
	t.Cleanup(func() { immutable(t, path, false) })
	f.completes(sids[0]) // the log goes on; the read model cannot follow

	select {
	case err := <-f.n.Failed():
		t.Logf("failed: %v", err)
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no new one can be made") {
			t.Errorf("the node failed with %v", err)
		}
	case <-time.After(time.Minute): // a deadline to catch the hang, not a measure
		t.Fatal("the node never said it cannot go on")
	}
	if code, body := f.healthz(); code != 503 || !strings.Contains(body, "read model") {
		t.Errorf("healthz: %d %s", code, body)
	}

	immutable(t, path, false)
	err := natstest.Poll(time.Minute, 50*time.Millisecond, func() error {
		if code, body := f.healthz(); code != 200 {
			return fmt.Errorf("healthz: %d %s", code, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.shows(sids)
	if got := damagedFiles(t, dir); len(got) != 1 {
		t.Errorf("set aside: %v", got)
	}
}

// A batch of the read model lingers for more records (projectorLinger), but
// not for a read: list and get right after a turn's outcome show the turn
// done, here with a linger that would outlast the test. The session's turns
// go on, so that get finds a row of the turn before (a session it has not
// seen yet it waits for anyway).
func TestReadsSeeTheTurnTheirClientSaw(t *testing.T) {
	// Not t.Parallel: it sets a package variable every node reads.
	linger := projectorLinger
	t.Cleanup(func() { projectorLinger = linger }) // after the node stops: it reads it
	projectorLinger = time.Hour
	f := startFaultNode(t, t.TempDir(), nil)
	sid := f.create()
	for turn := 1; turn <= 3; turn++ {
		f.completes(sid)
		page, err := f.c.List(f.ctx, wire.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Sessions) != 1 || page.Sessions[0].Turn != turn || page.Sessions[0].Status != projection.StatusCompleted {
			t.Fatalf("list after turn %d: %+v, want the session at that turn, %s", turn, page.Sessions, projection.StatusCompleted)
		}
		f.completes(sid)
		row, err := f.c.Get(f.ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if turn++; row.Turn != turn || row.Status != projection.StatusCompleted {
			t.Fatalf("get after turn %d: turn %d, %s", turn, row.Turn, row.Status)
		}
	}
}
