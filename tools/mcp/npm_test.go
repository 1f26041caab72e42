package mcp_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools/mcp"
)

// npmServer returns the path of an MCP server installed by make js-deps.
func npmServer(t *testing.T, bin string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", ".bin", bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed: run make js-deps (needs npm)", bin)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	return p
}

func TestEverythingStdio(t *testing.T) {
	bin := npmServer(t, "mcp-server-everything")
	t.Setenv("TAH_TEST_SECRET", "do-not-leak")
	b, nc := bridged(t, mcp.Config{Servers: map[string]mcp.ServerConfig{
		"everything": {Command: bin, Args: []string{"stdio"}, Env: map[string]string{"TAH_TEST_GIVEN": "given"}},
	}})
	if p := b.Problems(); len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	waitServing(t, b, "everything", true)
	if res := call(t, nc, "everything__echo", "c1", `{"message":"hi"}`); res.IsError || !strings.Contains(res.Output, "hi") {
		t.Fatalf("echo: %+v", res)
	}
	res := call(t, nc, "everything__get-tiny-image", "c2", `{}`)
	if res.IsError || res.Artifact == nil || !strings.Contains(res.Output, "image (image/png)") || !strings.Contains(res.Output, "stored as artifact tah_artifacts/calls/s_test/c2/") {
		t.Fatalf("image: %+v", res)
	}
	res = call(t, nc, "everything__get-env", "c3", `{}`)
	if res.IsError || !strings.Contains(res.Output, "TAH_TEST_GIVEN") || strings.Contains(res.Output, "do-not-leak") {
		t.Fatalf("env: %+v", res)
	}
	if res := call(t, nc, "everything__echo", "c4", `{"message": 3}`); !res.IsError || res.Code != event.CodeInvalidInput {
		t.Fatalf("bad input: %+v", res)
	}
}

func TestEverythingStreamableHTTP(t *testing.T) {
	bin := npmServer(t, "mcp-server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the HTTP server never listened on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, nc := bridged(t, mcp.Config{Servers: map[string]mcp.ServerConfig{
		"web": {URL: fmt.Sprintf("http://%s/mcp", addr), Headers: map[string]string{"X-Test": "1"}},
	}})
	waitServing(t, b, "web", true)
	if res := call(t, nc, "web__echo", "c1", `{"message":"over http"}`); res.IsError || !strings.Contains(res.Output, "over http") {
		t.Fatalf("echo: %+v", res)
	}
}

func TestFilesystem(t *testing.T) {
	bin := npmServer(t, "mcp-server-filesystem")
	root, outside := t.TempDir(), t.TempDir()
	b, nc := bridged(t, mcp.Config{Servers: map[string]mcp.ServerConfig{"fs": {Command: bin, Args: []string{root}}}})
	waitServing(t, b, "fs", true)
	path := filepath.Join(root, "notes.txt")
	if res := call(t, nc, "fs__write_file", "c1", fmt.Sprintf(`{"path":%q,"content":"hello"}`, path)); res.IsError {
		t.Fatalf("write: %+v", res)
	}
	if res := call(t, nc, "fs__read_text_file", "c2", fmt.Sprintf(`{"path":%q}`, path)); res.IsError || !strings.Contains(res.Output, "hello") {
		t.Fatalf("read: %+v", res)
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := call(t, nc, "fs__read_text_file", "c3", fmt.Sprintf(`{"path":%q}`, secret)); !res.IsError || strings.Contains(res.Output, "nope") {
		t.Fatalf("read outside the root: %+v", res)
	}
}
