package tah_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/tah-dev/tah"
)

// The Go API's defaults are safe beside a tah-node and beside another
// program: New's embedded server takes a free port (not tah-node's 4222),
// and a data directory already in use by a node is refused with a clear
// error, never shared.
func TestDefaultsRunBesideANode(t *testing.T) {
	// A process holding tah-node's port, as a tah-node on 4222 would.
	if l, err := net.Listen("tcp", "127.0.0.1:4222"); err == nil {
		t.Cleanup(func() { l.Close() })
	}
	dir := t.TempDir()
	t.Chdir(dir) // New's data directory is ./.tah
	quiet := slog.New(slog.DiscardHandler)

	first := tah.New().WithLogger(quiet)
	if err := first.Start(ctxT(t)); err != nil {
		t.Fatalf("a runtime with New's defaults beside a server on 4222: %v", err)
	}
	t.Cleanup(func() { first.Close(context.Background()) })
	if url := first.Node().Bus().ClientURL(); url == "nats://127.0.0.1:4222" {
		t.Fatalf("New's server listens on %s, tah-node's default", url)
	}

	second := tah.New().WithLogger(quiet)
	err := second.Start(ctxT(t))
	if !errors.Is(err, tah.ErrDataDirInUse) {
		second.Close(context.Background())
		t.Fatalf("a second runtime on the same .tah: %v, want ErrDataDirInUse", err)
	}
	if !strings.Contains(err.Error(), "pid") {
		t.Errorf("the error %q does not name the process", err)
	}

	// Once the first is closed, the directory is free again.
	if err := first.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := second.Start(ctxT(t)); err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close(context.Background())
	if _, err := os.Stat(".tah/node.lock"); err != nil {
		t.Errorf("the lock file: %v", err)
	}
}
