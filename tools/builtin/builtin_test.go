package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/builtin"
)

const secret = "TOP SECRET"

// fixture builds a project root beside an "outside" directory holding a secret,
// and returns the root.
func fixture(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content), 0o644))
	}
	must(os.MkdirAll(outside, 0o755))
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644))
	write("README.md", "hello\n")
	write("a/b.txt", "bee\n")
	write("a/c/deep.txt", "deep\n")
	must(os.MkdirAll(filepath.Join(root, "empty"), 0o755))
	write("bin.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	write("latin1.txt", "caf\xe9\n")
	var sb strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&sb, "line %06d\n", i+1)
	}
	write("big.txt", sb.String())
	write("oneline.txt", strings.Repeat("x", 200_000))
	write("boundary.txt", strings.Repeat("a", 8191)+"é and more text")
	symlink := func(target, rel string) { must(os.Symlink(target, filepath.Join(root, rel))) }
	symlink("README.md", "link-in")
	symlink("a", "link-dir")
	symlink("../outside/secret.txt", "link-out")
	symlink(filepath.Join(outside, "secret.txt"), "link-abs")
	symlink("../outside", "dirlink-out")
	symlink("loop2", "loop1")
	symlink("loop1", "loop2")
	symlink("self", "self")
	mkfifo(t, filepath.Join(root, "fifo"))
	return root, outside
}

func run(t *testing.T, tool tools.Tool, args any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return tools.NewExecutor(tools.MustRegistry(tool), tools.Options{MaxOutput: -1}).
		Execute(ctx, llm.ToolCall{ID: "call_1", Name: tool.Name(), Arguments: raw})
}

func TestSandboxEscapes(t *testing.T) {
	root, outside := fixture(t)
	read := builtin.ReadFile(root)
	list := builtin.ListFiles(root)
	cases := []struct {
		name, path string
		want       string // in the error output
		code       string
	}{
		{"dot-dot", "../outside/secret.txt", "'..' climbs above the root", event.CodeInvalidInput},
		{"dot-dot inside", "a/../../outside/secret.txt", "'..' climbs above the root", event.CodeInvalidInput},
		{"bare dot-dot", "..", "'..' climbs above the root", event.CodeInvalidInput},
		{"absolute outside", filepath.Join(outside, "secret.txt"), "absolute path outside the root", event.CodeInvalidInput},
		{"absolute system", "/etc/passwd", "absolute path outside the root", event.CodeInvalidInput},
		{"absolute dot-dot", filepath.Join(root, "..", "outside", "secret.txt"), "absolute path outside the root", event.CodeInvalidInput},
		{"symlink out", "link-out", "through a symlink", event.CodeInvalidInput},
		{"absolute symlink out", "link-abs", "through a symlink", event.CodeInvalidInput},
		{"through a directory symlink", "dirlink-out/secret.txt", "through a symlink", event.CodeInvalidInput},
		{"symlink loop", "loop1", "symlink loop", event.CodeToolError},
		{"self loop", "self", "symlink loop", event.CodeToolError},
		{"percent dot-dot", "%2e%2e/outside/secret.txt", "URL-encoded", event.CodeInvalidInput},
		{"percent slash", "..%2foutside%2fsecret.txt", "URL-encoded", event.CodeInvalidInput},
		{"percent upper", "%2E%2E%2Foutside", "URL-encoded", event.CodeInvalidInput},
		{"overlong utf-8 escape", "%c0%ae%c0%ae/outside", "URL-encoded", event.CodeInvalidInput},
		{"backslash", `..\outside\secret.txt`, "backslash", event.CodeInvalidInput},
		{"NUL byte", "README.md\x00.png", "NUL byte", event.CodeInvalidInput},
		{"invalid UTF-8", "\xc0\xae\xc0\xae/outside", "not valid UTF-8", event.CodeInvalidInput},
		{"fullwidth dots", "\uff0e\uff0e/outside/secret.txt", "looks like", event.CodeInvalidInput},
		{"one dot leaders", "\u2025/outside", "looks like", event.CodeInvalidInput},
		{"division slash", "..\u2215outside", "looks like", event.CodeInvalidInput},
		{"right-to-left override", "\u202etxt.EMDAER", "invisible or control", event.CodeInvalidInput},
		{"zero-width space", "README.md\u200b", "invisible or control", event.CodeInvalidInput},
		{"newline", "README.md\n", "invisible or control", event.CodeInvalidInput},
		{"missing", "nope.txt", "no such file or directory", event.CodeToolError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, tool := range []tools.Tool{read, list} {
				res := run(t, tool, map[string]any{"path": c.path})
				if !res.IsError || res.Code != c.code || !strings.Contains(res.Output, c.want) {
					t.Errorf("%s: got %s %q, want %s containing %q", tool.Name(), res.Code, res.Output, c.code, c.want)
				}
				if strings.Contains(res.Output, secret) {
					t.Errorf("%s leaked the secret: %q", tool.Name(), res.Output)
				}
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	root, _ := fixture(t)
	read := builtin.ReadFile(root)
	ok := func(args map[string]any) string {
		t.Helper()
		res := run(t, read, args)
		if res.IsError {
			t.Fatalf("%v: %s", args, res.Output)
		}
		return res.Output
	}
	fail := func(args map[string]any, want string) {
		t.Helper()
		res := run(t, read, args)
		if !res.IsError || !strings.Contains(res.Output, want) {
			t.Fatalf("%v: got %q, want an error containing %q", args, res.Output, want)
		}
	}

	// Allowed ways of naming files inside the root.
	for _, p := range []string{"README.md", "./README.md", "a/../README.md", "link-in", filepath.Join(root, "README.md")} {
		if got := ok(map[string]any{"path": p}); got != "hello\n" {
			t.Errorf("%s: %q", p, got)
		}
	}
	if got := ok(map[string]any{"path": "link-dir/b.txt"}); got != "bee\n" {
		t.Errorf("through an inner directory symlink: %q", got)
	}

	// Lines: the default limit, an offset, the end, past the end.
	got := ok(map[string]any{"path": "big.txt"})
	lines := strings.Split(got, "\n")
	if len(lines) != 2001 || lines[0] != "line 000001" || lines[1999] != "line 002000" ||
		lines[2000] != `[truncated: showed lines 1 to 2000; the file has more (1200000 bytes in all); continue with {"offset": 2000}]` {
		t.Errorf("default read: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if got := ok(map[string]any{"path": "big.txt", "offset": 2000, "limit": 2}); got != "line 002001\nline 002002\n[truncated: showed lines 2001 to 2002; the file has more (1200000 bytes in all); continue with {\"offset\": 2002}]" {
		t.Errorf("offset read: %q", got)
	}
	if got := ok(map[string]any{"path": "big.txt", "offset": 99_998}); got != "line 099999\nline 100000\n" {
		t.Errorf("read to the end: %q", got)
	}
	if got := ok(map[string]any{"path": "big.txt", "offset": 200_000}); got != "[offset 200000 is past the end of big.txt, which has 100000 lines]" {
		t.Errorf("past the end: %q", got)
	}

	// Bytes: an offset and limit, and the output limit on one long line.
	if got := ok(map[string]any{"path": "big.txt", "unit": "bytes", "offset": 12, "limit": 11}); got != "line 000002\n[truncated: showed bytes 12 to 22 of 1200000; continue with {\"unit\": \"bytes\", \"offset\": 23}]" {
		t.Errorf("bytes read: %q", got)
	}
	got = ok(map[string]any{"path": "oneline.txt"})
	if !strings.HasPrefix(got, strings.Repeat("x", 65536)+"\n[truncated: the 65536-byte output limit was reached in line 1; the file has 200000 bytes; continue with {\"unit\": \"bytes\", \"offset\": 65536}]") {
		t.Errorf("long line: %q", got[len(got)-200:])
	}
	small := &builtin.ReadFileTool{Root: root, Limits: builtin.Limits{MaxBytes: 100, MaxLines: 3}}
	if got := ok2(t, small, map[string]any{"path": "big.txt", "limit": 1000}); !strings.HasPrefix(got, "line 000001\nline 000002\nline 000003\n[truncated: showed lines 1 to 3") {
		t.Errorf("configured limits: %q", got)
	}

	// Binary files are described, not dumped.
	if got := ok(map[string]any{"path": "bin.png"}); got != "bin.png is a binary file (20 bytes, looks like image/png); its content is not shown." {
		t.Errorf("png: %q", got)
	}
	if got := ok(map[string]any{"path": "latin1.txt"}); !strings.HasPrefix(got, "latin1.txt is a binary file (5 bytes, ") {
		t.Errorf("invalid UTF-8: %q", got)
	}
	if got := ok(map[string]any{"path": "boundary.txt", "unit": "bytes", "offset": 8191, "limit": 2}); got != "é\n[truncated: showed bytes 8191 to 8192 of 8207; continue with {\"unit\": \"bytes\", \"offset\": 8193}]" {
		t.Errorf("a character across the 8 KiB sample is text: %q", got)
	}

	// A huge sparse file: text at the start, 1 GiB of holes after. Only what is
	// needed is read.
	huge := filepath.Join(root, "huge.log")
	if err := os.WriteFile(huge, []byte(strings.Repeat("log line\n", 3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<30); err != nil {
		t.Fatal(err)
	}
	if got := ok(map[string]any{"path": "huge.log", "limit": 2}); got != "log line\nlog line\n[truncated: showed lines 1 to 2; the file has more (1073741824 bytes in all); continue with {\"offset\": 2}]" {
		t.Errorf("huge file: %q", got)
	}
	zeros := filepath.Join(root, "zeros.img")
	if f, err := os.Create(zeros); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if err := os.Truncate(zeros, 1<<30); err != nil {
		t.Fatal(err)
	}
	if got := ok(map[string]any{"path": "zeros.img"}); !strings.HasPrefix(got, "zeros.img is a binary file (1073741824 bytes") {
		t.Errorf("huge binary: %q", got)
	}

	// Not files.
	fail(map[string]any{"path": "a"}, "is a directory; use list_files")
	fail(map[string]any{"path": "."}, "is a directory")
	if _, err := os.Lstat(filepath.Join(root, "fifo")); err == nil {
		fail(map[string]any{"path": "fifo"}, "not a regular file (it is a named pipe)")
	}
	if got := ok(map[string]any{"path": "empty/../README.md"}); got != "hello\n" {
		t.Errorf("%q", got)
	}
	if err := os.WriteFile(filepath.Join(root, "empty.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ok(map[string]any{"path": "empty.txt"}); got != "(empty.txt is empty)" {
		t.Errorf("empty file: %q", got)
	}
	// Schema: unknown fields and bad units are refused before the tool runs.
	if res := run(t, read, map[string]any{"path": "README.md", "unit": "pages"}); res.Code != event.CodeInvalidInput {
		t.Errorf("bad unit: %+v", res)
	}
	if res := run(t, read, map[string]any{}); res.Code != event.CodeInvalidInput {
		t.Errorf("no path: %+v", res)
	}
}

func ok2(t *testing.T, tool tools.Tool, args map[string]any) string {
	t.Helper()
	res := run(t, tool, args)
	if res.IsError {
		t.Fatalf("%v: %s", args, res.Output)
	}
	return res.Output
}

func TestListFiles(t *testing.T) {
	root, _ := fixture(t)
	list := builtin.ListFiles(root)
	ok := func(args map[string]any) string { t.Helper(); return ok2(t, list, args) }

	want := strings.Join([]string{
		"README.md (6 bytes)",
		"a/",
		"big.txt (1200000 bytes)",
		"bin.png (20 bytes)",
		"boundary.txt (8207 bytes)",
		"dirlink-out (symlink leading outside the root)",
		"empty/",
		"fifo (named pipe)",
		"latin1.txt (5 bytes)",
		"link-abs (symlink leading outside the root)",
		"link-dir -> a (symlink to a directory, not followed)",
		"link-in -> README.md (symlink, 6 bytes)",
		"link-out (symlink leading outside the root)",
		"loop1 -> loop2 (symlink loop)",
		"loop2 -> loop1 (symlink loop)",
		"oneline.txt (200000 bytes)",
		"self -> self (symlink loop)",
	}, "\n")
	if _, err := os.Lstat(filepath.Join(root, "fifo")); err != nil {
		want = strings.Replace(want, "fifo (named pipe)\n", "", 1)
	}
	for range 2 { // the same every time
		if got := ok(map[string]any{}); got != want {
			t.Fatalf("root listing:\n%s\nwant:\n%s", got, want)
		}
	}
	if got := ok(map[string]any{"path": "a", "recursive": true}); got != "a/b.txt (4 bytes)\na/c/\na/c/deep.txt (5 bytes)" {
		t.Errorf("recursive: %q", got)
	}
	if got := ok(map[string]any{"path": "link-dir"}); got != "link-dir/b.txt (4 bytes)\nlink-dir/c/" {
		t.Errorf("listing through an inner symlink: %q", got)
	}
	if got := ok(map[string]any{"path": "a/b.txt"}); got != "a/b.txt (4 bytes)" {
		t.Errorf("a file: %q", got)
	}
	if got := ok(map[string]any{"path": "empty"}); got != "(empty directory)" {
		t.Errorf("empty: %q", got)
	}
	if got := ok(map[string]any{"max_entries": 2}); got != "README.md (6 bytes)\na/\n[truncated: listed the first 2 entries; more exist. List a subdirectory, or set max_entries (at most 1000).]" {
		t.Errorf("max_entries: %q", got)
	}
	shallow := &builtin.ListFilesTool{Root: root, Limits: builtin.Limits{MaxDepth: 1, MaxEntries: 4}}
	if got := ok2(t, shallow, map[string]any{"path": "a", "recursive": true}); got != "a/b.txt (4 bytes)\na/c/\n[depth limit: 1 directories at depth 1 were not descended into; list them to see their contents.]" {
		t.Errorf("depth limit: %q", got)
	}
	if got := ok2(t, shallow, map[string]any{"recursive": true}); !strings.Contains(got, "\n[truncated: listed the first 4 entries; more exist. List a subdirectory, or set max_entries (at most 4).]") {
		t.Errorf("entry limit: %q", got)
	}
	if res := run(t, shallow, map[string]any{"max_entries": 5}); res.Code != event.CodeInvalidInput {
		t.Errorf("max_entries above the limit: %+v", res)
	}
}

func TestWriteFile(t *testing.T) {
	root, outside := fixture(t)
	for _, tool := range builtin.Tools(builtin.Config{Root: root}) {
		if tool.Name() == "write_file" {
			t.Fatal("write_file is offered without being configured")
		}
	}
	nc := bustest.Connect(t, bustest.Server(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := artifacts.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	ts := builtin.Tools(builtin.Config{Root: root, Write: true, Artifacts: store})
	if len(ts) != 3 || ts[2].Name() != "write_file" || !tools.IsExclusive(ts[2]) {
		t.Fatalf("tools = %v", ts)
	}
	exec := tools.NewExecutor(tools.MustRegistry(ts...), tools.Options{})
	write := func(path, content string) tools.Result {
		raw, _ := json.Marshal(map[string]string{"path": path, "content": content})
		return exec.Execute(tools.WithCall(ctx, tools.CallInfo{Session: "s_w"}), llm.ToolCall{ID: "call_w", Name: "write_file", Arguments: raw})
	}

	res := write("notes/today.md", "# Today\n")
	if res.IsError || res.Artifact == nil {
		t.Fatalf("write: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "notes", "today.md")); string(got) != "# Today\n" {
		t.Fatalf("file holds %q", got)
	}
	if res.Output != "Wrote 8 bytes to notes/today.md. A copy is artifact tah_artifacts/calls/s_w/call_w/notes/today.md." {
		t.Errorf("output %q", res.Output)
	}
	rc, err := store.Open(ctx, *res.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(rc)
	rc.Close()
	if string(stored) != "# Today\n" {
		t.Errorf("artifact holds %q", stored)
	}

	for _, c := range []struct{ path, want string }{
		{"../outside/new.txt", "'..' climbs above the root"},
		{filepath.Join(outside, "new.txt"), "absolute path outside the root"},
		{"dirlink-out/new.txt", "through a symlink"},
		{"link-out", "through a symlink"},
		{"a", "not a regular file"},
		{".", "names the root directory"},
		{"%2e%2e/new.txt", "URL-encoded"},
	} {
		if res := write(c.path, "pwned"); !res.IsError || !strings.Contains(res.Output, c.want) {
			t.Errorf("%s: %+v", c.path, res)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(got) != secret {
		t.Errorf("the outside secret changed to %q", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("a file was written outside the root")
	}
}
