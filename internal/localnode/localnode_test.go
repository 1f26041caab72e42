package localnode

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

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
	if f := Find(filepath.Join(root, "a", "b"), ".tah"); f != "" {
		t.Fatalf("Find = %q with neither node.json nor admin.creds", f)
	}
	if err := os.WriteFile(AdminCredsPath(dir), []byte("creds"), 0o600); err != nil {
		t.Fatal(err)
	}
	if f := Find(filepath.Join(root, "a", "b"), ".tah"); f != dir {
		t.Fatalf("Find = %q with an admin.creds, want %q", f, dir)
	}
}
