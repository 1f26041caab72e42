package nodecmd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/config"
)

func TestUIToken(t *testing.T) {
	dir := t.TempDir()
	tok, path, err := uiToken(dir)
	if err != nil || len(tok) < minTokenLen {
		t.Fatalf("a new token: %q %v", tok, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
	if again, _, err := uiToken(dir); err != nil || again != tok {
		t.Errorf("the token read again: %q %v, want %q", again, err, tok)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := uiToken(dir); err == nil || !strings.Contains(err.Error(), "longer token") {
		t.Errorf("a short token: %v", err)
	}
}

// On an external NATS the UI needs a credential put in the data directory:
// without one the node runs and its / says why the UI is off.
func TestUIOffWithoutItsCredential(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir, cfg.NATS.URL = t.TempDir(), "nats://127.0.0.1:1"
	u := startUI(context.Background(), cfg, cfg.NATS.URL, newLogger(cfg, io.Discard))
	defer u.close()
	if u.off == "" || !strings.Contains(u.off, filepath.Join(cfg.DataDir, "ui.creds")) || !strings.Contains(u.off, "client role") {
		t.Errorf("why the UI is off: %q", u.off)
	}
}
