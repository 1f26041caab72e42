package bench

import (
	"context"
	"os"
)

// sqliteRows is how many one-row transactions row 1 times.
const sqliteRows = 3000

// sqliteScenario is row 1's SQLite floor: one-row transactions with the
// store's settings, the cost under every read model commit.
type sqliteScenario struct {
	cfg Config
	dir string
}

func (s *sqliteScenario) Name() string { return "row 1: SQLite one-row transactions" }

func (s *sqliteScenario) Setup(_ context.Context, _ Env) error {
	dir, err := os.MkdirTemp(s.cfg.Tmp, "tah-bench-sqlite-")
	s.dir = dir
	return err
}

func (s *sqliteScenario) Run(ctx context.Context, rep *Report) error {
	d, err := sqliteRowFloor(ctx, s.dir, sqliteRows)
	if err != nil {
		return err
	}
	rep.SQLiteRowP50, rep.SQLiteRowRate = d.p50(), perSec(len(d), d.sum())
	return nil
}

func (s *sqliteScenario) Teardown(context.Context) error {
	if s.dir == "" {
		return nil
	}
	return os.RemoveAll(s.dir)
}
