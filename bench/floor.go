package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/store"

	_ "modernc.org/sqlite" // the SQLite driver the store uses
)

// appendRaw appends copies of evs, one fenced append each, as session fsid (an
// id as long as theirs, so that every message has the same size as the
// original), and returns the time each append took, in order.
func appendRaw(ctx context.Context, b *bus.Bus, fsid string, evs []event.Event) (sample, error) {
	w, err := b.Writer(fsid, 1, 0)
	if err != nil {
		return nil, err
	}
	out := make(sample, len(evs))
	for i, ev := range evs {
		e := ev
		e.Session, e.Seq, e.Epoch = fsid, 0, 0
		t := time.Now()
		if _, err := w.Append(ctx, e); err != nil {
			return nil, fmt.Errorf("floor append %d (%s): %w", i, ev.Type, err)
		}
		out[i] = time.Since(t)
	}
	return out, nil
}

// applyFloor applies before in one untimed batch to a fresh store, then each
// group in a transaction of its own, and returns the time of each.
func applyFloor(ctx context.Context, path string, before []event.Event, groups [][]event.Event) (sample, error) {
	s, err := store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, err := s.Apply(ctx, before); err != nil {
		return nil, err
	}
	out := make(sample, 0, len(groups))
	for _, g := range groups {
		t := time.Now()
		res, err := s.Apply(ctx, g)
		if err != nil {
			return nil, err
		}
		if len(res.Problems) > 0 {
			return nil, fmt.Errorf("floor apply: %v", res.Problems[0])
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// sqliteRowFloor times n transactions of one 200-byte row each, with the
// store's settings (WAL, synchronous NORMAL, BEGIN IMMEDIATE): the cost under
// every read model commit.
func sqliteRowFloor(ctx context.Context, dir string, n int) (sample, error) {
	path := filepath.Join(dir, "floor-row.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB)`); err != nil {
		return nil, err
	}
	ins, err := db.PrepareContext(ctx, `INSERT INTO t (body) VALUES (?)`)
	if err != nil {
		return nil, err
	}
	defer ins.Close()
	body := []byte(strings.Repeat("x", 200))
	out := make(sample, n)
	for i := range n {
		t := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, body); err != nil {
			tx.Rollback()
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		out[i] = time.Since(t)
	}
	return out, nil
}
