package mock_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm/mock"
)

// A list_files that shows the data directory does not make the demo report it or
// read in it.
func TestDemoLeavesTheDataDirectoryOut(t *testing.T) {
	root := project(t, true)
	if err := os.MkdirAll(filepath.Join(root, ".tah", "nats"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".tah", "credentials.json"), []byte(`{"password":"pw"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := runTools(t, mock.Demo(mock.WithPace(0)), "analyse this project's directory structure", root, func() string { return listFiles(t, root, true) })
	if len(rs) != 3 {
		t.Fatalf("%d steps, want list_files, read_file README.md, answer", len(rs))
	}
	if args := string(rs[1].ToolCalls[0].Arguments); args != `{"path":"README.md"}` {
		t.Errorf("the demo read %s", args)
	}
	answer := rs[2].Content
	if strings.Contains(answer, ".tah") || strings.Contains(answer, "credentials") {
		t.Errorf("the answer shows the data directory:\n%s", answer)
	}
	if !strings.Contains(answer, "The top level holds 7 entries: 3 directories and 4 files.") {
		t.Errorf("answer:\n%s", answer)
	}
}
