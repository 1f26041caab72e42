package auth_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/auth"
)

// A data directory made inside a git work tree (./.tah, the default) holds
// the operator's seed and admin.creds: `git add -A` must not take them.
func TestDataDirIsIgnoredByGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this machine")
	}
	repo := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(repo, ".tah")
	if _, err := auth.Ensure(dataDir); err != nil {
		t.Fatal(err)
	}
	run("add", "-A")
	staged := run("diff", "--cached", "--name-only")
	if strings.Contains(staged, ".tah") {
		t.Fatalf("git add -A staged the data directory:\n%s", staged)
	}
	if !strings.Contains(staged, "main.go") {
		t.Fatalf("the project's own file was not staged:\n%s", staged)
	}

	// A .gitignore the user wrote there is theirs: never replaced.
	mine := []byte("node.json\n")
	if err := os.WriteFile(filepath.Join(dataDir, ".gitignore"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Ensure(dataDir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dataDir, ".gitignore")); string(b) != string(mine) {
		t.Fatalf(".gitignore replaced: %q", b)
	}
}
