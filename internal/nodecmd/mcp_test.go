package nodecmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/wire"
)

// TestMCPCreds: an embedded server's node issues the bridge a tool
// credential for exactly its tools; with an external NATS the operator's
// must be there and name them all, or the error says what to put where.
func TestMCPCreds(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	names := []string{"fs__list_directory", "fs__read_text_file"}
	path, err := mcpCreds(cfg, names)
	if err != nil {
		t.Fatal(err)
	}
	if role, err := auth.CredsRole(path); err != nil || role != wire.RoleTool {
		t.Fatalf("role %q %v", role, err)
	}
	if denied, err := auth.Denied(path, nil, []string{wire.ToolSubject(names[0]), wire.ToolSubject(names[1])}); err != nil || len(denied) > 0 {
		t.Fatalf("denied %v %v", denied, err)
	}
	if denied, _ := auth.Denied(path, nil, []string{wire.ToolSubject("read_file")}); len(denied) != 1 {
		t.Fatalf("the credential serves a tool it does not name")
	}

	ext := cfg
	ext.NATS.URL = "nats://127.0.0.1:1"
	ext.DataDir = t.TempDir()
	if _, err := mcpCreds(ext, names); err == nil || !strings.Contains(err.Error(), `put a credential of the tool role named "mcp" for the tools fs__list_directory,fs__read_text_file at `+filepath.Join(ext.DataDir, "mcp.creds")) {
		t.Fatalf("no credential: %v", err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(filepath.Join(ext.DataDir, "mcp.creds"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mcpCreds(ext, append(names, "fs__write_file")); err == nil || !strings.Contains(err.Error(), "subscribe "+wire.ToolSubject("fs__write_file")) {
		t.Fatalf("a tool missing: %v", err)
	}
	if _, err := mcpCreds(ext, names); err != nil {
		t.Fatalf("the right credential: %v", err)
	}
}
