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

// appendRecords appends copies of recs, each record by one fenced append,
// as session fsid (an id as long as theirs, so that every message has the
// same size as the original), and returns the time each append took, in
// order.
func appendRecords(ctx context.Context, b *bus.Bus, fsid string, recs [][]event.Event) (sample, error) {
	w, err := b.Writer(fsid, 1, 0)
	if err != nil {
		return nil, err
	}
	out := make(sample, len(recs))
	for i, r := range recs {
		evs := make([]event.Event, len(r))
		for j, e := range r {
			e.Session, e.Seq, e.Index, e.Epoch = fsid, 0, 0, 0
			evs[j] = e
		}
		t := time.Now()
		if _, err := w.Append(ctx, evs...); err != nil {
			return nil, fmt.Errorf("floor append %d (%s): %w", i, recordName(r), err)
		}
		out[i] = time.Since(t)
	}
	return out, nil
}

// recordName is the types of a record's events, joined with "+".
func recordName(r []event.Event) string {
	types := make([]string, len(r))
	for i, e := range r {
		types[i] = string(e.Type)
	}
	return strings.Join(types, "+")
}

// recordBytes is the size of the body of the record that holds evs.
func recordBytes(evs []event.Event) int {
	body, _ := event.EncodeRecord(evs)
	return len(body)
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
