package store

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// TestReadsUseIndexes runs every read of the store (each filter of a
// listing, a session with children, each part of a session's history, its
// state) and asks SQLite for the plan of each statement it made: none may
// read a whole table or build an index of one for the query (SQLite's
// "AUTOMATIC" index), since each would cost in proportion to every session
// of the read model, at each read of one. A plan that scans a table in
// the order of one of its indexes (a listing, most recent first, that stops
// at its page) is not a whole-table read; a listing by status or by tenant
// must read the index of its status or tenant, in its order (uses).
//
// A new read of the store belongs in reads below.
func TestReadsUseIndexes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	type read struct {
		query string
		args  []any
	}
	var seen []read
	s.r.observe = func(query string, args []any) { seen = append(seen, read{query, args}) }

	logs := [][]event.Event{family(t)}
	for _, id := range []string{"acme.s_1", "acme.s_2", "beta.s_1"} {
		logs = append(logs, newSession(t, id, event.Config{}, map[string]string{"team": "a"}).userTurn("hello").events)
	}
	apply(t, s, merge(logs...), 16)

	reads := map[string]func() error{
		"get a parent":   func() error { _, err := s.GetSession(ctx, "s_parent"); return err },
		"get a child":    func() error { _, err := s.GetSession(ctx, "s_child_a"); return err },
		"list":           func() error { _, err := s.ListSessions(ctx, ListOptions{}); return err },
		"list by status": func() error { _, err := s.ListSessions(ctx, ListOptions{Status: projection.StatusIdle}); return err },
		"list a tenant":  func() error { _, err := s.ListSessions(ctx, ListOptions{Tenant: "acme"}); return err },
		"list by a label": func() error {
			_, err := s.ListSessions(ctx, ListOptions{Labels: map[string]string{"team": "a"}})
			return err
		},
		"list by a label's key": func() error {
			_, err := s.ListSessions(ctx, ListOptions{Labels: map[string]string{"team": ""}})
			return err
		},
		"list by a label, scanned": func() error {
			_, err := s.listSessions(ctx, ListOptions{Labels: map[string]string{"team": "a"}}, labelsScanned)
			return err
		},
		"list a next page": func() error {
			_, err := s.ListSessions(ctx, ListOptions{Before: "1000.s_parent", Offset: 1})
			return err
		},
		"count a tenant": func() error { _, err := s.CountTenantSessions(ctx, "acme"); return err },
		"messages":       func() error { _, err := s.Messages(ctx, "s_parent"); return err },
		"steps":          func() error { _, err := s.Steps(ctx, "s_parent"); return err },
		"tool calls":     func() error { _, err := s.ToolCalls(ctx, "s_parent"); return err },
		"artifacts":      func() error { _, err := s.Artifacts(ctx, "s_parent"); return err },
		"checkpoints":    func() error { _, err := s.Checkpoints(ctx, "s_parent"); return err },
		"state":          func() error { _, err := s.State(ctx, "s_parent"); return err },
		"positions":      func() error { _, err := s.Positions(ctx, DefaultConsumer); return err },
		"last sequence":  func() error { _, err := s.LastSeq(ctx, "s_parent"); return err },
	}
	// The index each of these reads must use: a scan in another index's
	// order would read on until its page is full.
	uses := map[string]string{
		"list by status":           "USING INDEX sessions_status (status=?)",
		"list a tenant":            "USING INDEX sessions_tenant (tenant=?)",
		"list by a label":          "SEARCH d USING INDEX session_labels_key_value (key=? AND value=?)",
		"list by a label's key":    "SEARCH d USING INDEX session_labels_key_value (key=?)",
		"list by a label, scanned": "SCAN sessions USING INDEX sessions_updated",
	}
	// The reads that may sort what they read: a label's few sessions
	// (rareLabel).
	sorts := map[string]bool{"list by a label": true, "list by a label's key": true}
	// A bare "SCAN t" reads all of t; "SCAN t USING [COVERING] INDEX i"
	// reads t in i's order; tree is GetSession's recursive CTE, a
	// constant row is a VALUES or a SELECT without a table, and a
	// "(subquery-N)" the rows of a subquery, whose own plan is checked.
	wholeTable := regexp.MustCompile(`^SCAN ([^(\s]\S*)$`)
	for name, fn := range reads {
		seen = seen[:0]
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(seen) == 0 {
			t.Fatalf("%s: no read seen", name)
		}
		used := false
		for _, r := range seen {
			for _, step := range plan(t, s, r.query, r.args) {
				used = used || uses[name] != "" && strings.Contains(step, uses[name])
				m := wholeTable.FindStringSubmatch(step)
				if uses[name] != "" && !sorts[name] && strings.HasPrefix(step, "USE TEMP B-TREE") {
					t.Errorf("%s: %q sorts what it reads (%s)", name, oneLine(r.query), step)
				}
				if strings.Contains(step, "AUTOMATIC") || m != nil && m[1] != "tree" && step != "SCAN CONSTANT ROW" {
					t.Errorf("%s: %q reads a whole table (%s)", name, oneLine(r.query), step)
				}
			}
		}
		if uses[name] != "" && !used {
			t.Errorf("%s: no plan step %q", name, uses[name])
		}
	}
}

// plan is SQLite's query plan of query with args, a line a step.
func plan(t *testing.T, s *Store, query string, args []any) []string {
	t.Helper()
	rows, err := s.r.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %q: %v", oneLine(query), err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

func oneLine(query string) string {
	return strings.Join(strings.Fields(query), " ")
}
