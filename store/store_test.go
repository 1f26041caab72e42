package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
)

func TestOpenMigratesAnEmptyFileAndReopens(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nested", "dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil { // an empty file is an empty database
		t.Fatal(err)
	}
	s := openAt(t, path, Options{})
	if v := userVersion(t, path); v != SchemaVersion() {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	evs := richLog(t, "s_a")
	apply(t, s, evs, 16)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if v := userVersion(t, path); v != SchemaVersion() {
		t.Fatalf("reopened at user_version %d", v)
	}
	checkEquivalent(t, s, evs)
	if p, err := s.Positions(ctx, DefaultConsumer); err != nil || p[0] != uint64(len(evs)) {
		t.Fatalf("position after reopen: %v %v", p, err)
	}
	// The journal is WAL, so that readers run beside the writer.
	var mode string
	if err := s.r.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q %v", mode, err)
	}
}

// TestOpenResetsAVersion1ReadModel: a read model of schema 1 (whole requests
// in its steps, one position for one stream) is reset when this version opens
// it: its sequences were those of a log that the migration rewrote, and the
// read model is derived, rebuilt from the log.
func TestOpenResetsAVersion1ReadModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], "PRAGMA user_version = 1",
		`INSERT INTO sessions (id, status) VALUES ('s_old', 'completed')`,
		`INSERT INTO steps (session_id, idx, step_id, type, status, request)
			VALUES ('s_old', 0, 'st1', 'llm', 'completed', '{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a"}]}')`,
		`INSERT INTO positions (consumer, seq) VALUES ('projector', 42)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := openAt(t, path, Options{})
	if v := userVersion(t, path); v != SchemaVersion() {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	ctx := context.Background()
	if _, err := s.Steps(ctx, "s_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("steps of a reset read model: %v", err)
	}
	if p, err := s.Positions(ctx, DefaultConsumer); err != nil || slices.ContainsFunc(p, func(x uint64) bool { return x != 0 }) {
		t.Fatalf("positions %v %v", p, err)
	}
}

func TestOpenCreatesTheDirectory(t *testing.T) {
	// Characters that mean something in a "file:" URI are taken literally.
	path := filepath.Join(t.TempDir(), "a b", "c?d#e%20f", ".tah", "data.db")
	s := openAt(t, path, Options{})
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Fatalf("path %q", s.Path())
	}
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	s := openAt(t, path, Options{})
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(context.Background(), path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("opening a newer schema: %v", err)
	}
	for _, want := range []string{"99", "delete the file", "rebuild"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenRefusesWhatIsNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(context.Background(), path); err == nil {
		s.Close()
		t.Fatal("opened a text file")
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Apply(ctx, richLog(t, "s_a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("apply: %v", err)
	}
	if _, err := s.GetSession(ctx, "s_a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.ListSessions(ctx, ListOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("list: %v", err)
	}
	if _, err := s.State(ctx, "s_a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("state: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	apply(t, s, richLog(t, "s_a"), 100)
	id := "s_missing"
	_, err := s.GetSession(ctx, id)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), id) {
			t.Errorf("%s: %v", what, err)
		}
	}
	check("get", err)
	_, err = s.Messages(ctx, id)
	check("messages", err)
	_, err = s.Steps(ctx, id)
	check("steps", err)
	_, err = s.ToolCalls(ctx, id)
	check("tool calls", err)
	_, err = s.Artifacts(ctx, id)
	check("artifacts", err)
	_, err = s.Checkpoints(ctx, id)
	check("checkpoints", err)
	_, err = s.State(ctx, id)
	check("state", err)
}

func TestTitle(t *testing.T) {
	long := strings.Repeat("字", TitleRunes+5)
	for _, c := range []struct {
		msgs []llm.Message
		want string
	}{
		{nil, ""},
		{[]llm.Message{llm.System("sys")}, ""},
		{[]llm.Message{llm.System("sys"), llm.User("  hello \n\t world  "), llm.User("second")}, "hello world"},
		{[]llm.Message{llm.User(long)}, strings.Repeat("字", TitleRunes) + "…"},
		{[]llm.Message{llm.User(strings.Repeat("a", TitleRunes))}, strings.Repeat("a", TitleRunes)},
	} {
		if got := title(c.msgs); got != c.want {
			t.Errorf("title(%v) = %q, want %q", c.msgs, got, c.want)
		}
	}
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
