package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/tah-dev/tah/store"
)

// readModelPositions reads, from the read model's SQLite file in a node's
// data directory (data.db, in WAL mode: a reader in another process sees
// its last commit), the last sequence of each of the log's shards its
// projector applied.
func readModelPositions(ctx context.Context, dataDir string, shards int) ([]uint64, error) {
	path := filepath.Join(dataDir, "data.db")
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("read model %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT shard, seq FROM positions WHERE consumer = ?`, store.DefaultConsumer)
	if err != nil {
		return nil, fmt.Errorf("read model %s: %w", path, err)
	}
	defer rows.Close()
	pos := make([]uint64, shards)
	for rows.Next() {
		var k int
		var seq int64
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, fmt.Errorf("read model %s: %w", path, err)
		}
		if k >= 0 && k < shards {
			pos[k] = uint64(seq)
		}
	}
	return pos, rows.Err()
}
