package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkListFiles is a call of list_files on a small project (the
// tool of bench row 9), with a data directory to protect beside it as a
// node has: what the listing costs, its system calls mostly.
func BenchmarkListFiles(b *testing.B) {
	dir := b.TempDir()
	root := filepath.Join(dir, "a", "b", "project")
	for _, d := range []string{"cmd", "docs", "internal"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("file%d.go", i)), []byte("package x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		b.Fatal(err)
	}
	tool := &ListFilesTool{Root: root, Protect: Protect{DataDir: data}}
	in := json.RawMessage(`{"path":"."}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tool.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
