package localnode

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestEnsureCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".tah")
	if _, err := ReadCredentials(dir); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no file: %v", err)
	}
	c, created, err := EnsureCredentials(dir)
	if err != nil || !created || c.User == "" || len(c.Password) < 32 {
		t.Fatalf("first start: %+v %v %v", c, created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, CredentialsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v, want 0700", di.Mode().Perm())
	}
	again, created, err := EnsureCredentials(dir)
	if err != nil || created || again != c {
		t.Fatalf("second start: %+v %v %v", again, created, err)
	}
	if err := os.WriteFile(filepath.Join(dir, CredentialsFile), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCredentials(dir); err == nil {
		t.Fatal("empty credentials accepted")
	}
}

func TestNodeInfo(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".tah")
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := Find(filepath.Join(root, "a", "b"), ".tah"); got != "" {
		t.Fatalf("found %q before node.json exists", got)
	}
	info := NodeInfo{Node: "n1", PID: 42, URL: "nats://127.0.0.1:4222", HTTP: "127.0.0.1:9464", Started: time.Now().UTC().Truncate(time.Second)}
	if err := WriteNodeInfo(dir, info); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNodeInfo(dir)
	if err != nil || got != info {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if f := Find(filepath.Join(root, "a", "b"), ".tah"); f != dir {
		t.Fatalf("Find = %q, want %q", f, dir)
	}
	RemoveNodeInfo(dir, 7) // another process's: kept
	if _, err := ReadNodeInfo(dir); err != nil {
		t.Fatal("removed the node.json of another process")
	}
	RemoveNodeInfo(dir, 42)
	if _, err := ReadNodeInfo(dir); err == nil {
		t.Fatal("node.json not removed")
	}
}
