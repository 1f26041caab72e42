package builtin_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/builtin"
)

const credential = "the-node-password-3f9a"

// secretsFixture builds a tools root holding the node's data directory ("state",
// a name no pattern matches, so that only its identity protects it), credential
// files by every protected name, files of a deny list, and symlinks to all of them.
func secretsFixture(t *testing.T) (root string, protect builtin.Protect) {
	t.Helper()
	root = t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(target, rel string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "hello\n")
	write("statement.txt", "not the data directory\n")
	write("config/dev/db.txt", "dev\n")
	write("state/credentials.json", `{"user":"tah","password":"`+credential+`"}`)
	write("state/other.txt", credential)
	write("state/nats/jetstream/meta.inf", credential)
	write(".tah/credentials.json", credential)
	write("credentials.json", credential)
	write("node.json", credential)
	write("keys/user.creds", credential)
	write("keys/op.nk", credential)
	write("keys/acct.seed", credential)
	write("keys/user.jwt", credential)
	write("deploy/prod.pem", credential)
	write("config/prod/db.txt", credential)
	write("a/b/c.txt", "see\n")
	symlink("state/credentials.json", "link-creds")
	symlink("state/other.txt", "link-other")
	symlink("state", "link-state")
	symlink("../../state", "a/b/up")
	symlink("keys/user.creds", "innocent.txt")
	symlink("deploy/prod.pem", "link-pem")
	symlink("link-other", "chain")
	return root, builtin.Protect{DataDir: filepath.Join(root, "state"), Deny: []string{"*.PEM", "config/prod"}}
}

// refused checks that res is the ordinary refusal, which names nothing secret.
func refused(t *testing.T, tool tools.Tool, p string, res tools.Result) {
	t.Helper()
	if !res.IsError || res.Code != event.CodeToolError || !strings.Contains(res.Output, "is not readable by tools") {
		t.Errorf("%s %q: got %s %q, want a refusal", tool.Name(), p, res.Code, res.Output)
	}
	for _, leak := range []string{credential, "credential", "data dir", "secret", "state/"} {
		if strings.Contains(res.Output, leak) && !strings.Contains(p, leak) {
			t.Errorf("%s %q: the refusal says %q: %q", tool.Name(), p, leak, res.Output)
		}
	}
}

func TestProtectedPaths(t *testing.T) {
	root, protect := secretsFixture(t)
	read := &builtin.ReadFileTool{Root: root, Protect: protect}
	list := &builtin.ListFilesTool{Root: root, Protect: protect}
	paths := []string{
		// The data directory by identity: directly, with "..", absolute, through symlinks.
		"state", "state/other.txt", "state/nats/jetstream/meta.inf", "./state/../state/other.txt",
		"a/../state/other.txt", filepath.Join(root, "state", "other.txt"), "link-state", "link-state/other.txt",
		"link-other", "chain", "a/b/up", "a/b/up/other.txt",
		// Credential files by name, in any case, present or not.
		"credentials.json", "CREDENTIALS.JSON", "Node.Json", "keys/user.creds", "keys/USER.CREDS", "keys/op.nk",
		"keys/acct.seed", "keys/user.jwt", "nowhere/x.Jwt", "link-creds", "innocent.txt",
		// TAH's default data directory by name.
		".tah", ".tah/credentials.json", ".TAH/credentials.json",
		// The deny list.
		"deploy/prod.pem", "DEPLOY/PROD.pem", "link-pem", "config/prod", "config/prod/db.txt", "config/PROD/db.txt",
	}
	if caseInsensitive(t, root) {
		paths = append(paths, "STATE/other.txt", "State")
	}
	for _, p := range paths {
		for _, tool := range []tools.Tool{read, list} {
			refused(t, tool, p, run(t, tool, map[string]any{"path": p}))
		}
	}
	// What is not protected stays readable, including a name that starts like
	// the data directory's and a path beside the denied one.
	for _, p := range []string{"README.md", "statement.txt", "config/dev/db.txt", "a/b/c.txt"} {
		if res := run(t, read, map[string]any{"path": p}); res.IsError {
			t.Errorf("%s: %s", p, res.Output)
		}
	}
}

// caseInsensitive reports whether the file system of dir ignores case.
func caseInsensitive(t *testing.T, dir string) bool {
	t.Helper()
	p := filepath.Join(dir, "case-probe")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	_, err := os.Stat(filepath.Join(dir, "CASE-PROBE"))
	return err == nil
}

func TestProtectedEntriesAreLeftOutOfListings(t *testing.T) {
	root, protect := secretsFixture(t)
	list := &builtin.ListFilesTool{Root: root, Protect: protect}
	want := strings.Join([]string{
		"README.md (6 bytes)",
		"a/",
		"config/",
		"deploy/",
		"keys/",
		"statement.txt (23 bytes)",
	}, "\n")
	if got := ok2(t, list, map[string]any{}); got != want {
		t.Errorf("root listing:\n%s\nwant:\n%s", got, want)
	}
	got := ok2(t, list, map[string]any{"recursive": true})
	for _, leak := range []string{credential, "state", ".tah", "credentials.json", "node.json", "user.", "op.nk", "acct.seed", "prod", "link-", "innocent", "chain", "up"} {
		if strings.Contains(strings.ReplaceAll(got, "statement.txt", ""), leak) {
			t.Errorf("the recursive listing shows %q:\n%s", leak, got)
		}
	}
	for _, shown := range []string{"a/b/c.txt (4 bytes)", "config/dev/db.txt (4 bytes)", "keys/"} {
		if !strings.Contains(got, shown) {
			t.Errorf("the recursive listing lacks %q:\n%s", shown, got)
		}
	}
	// Hidden entries do not count: the listing is complete when only they remain.
	if got := ok2(t, list, map[string]any{"path": "keys"}); got != "(empty directory)" {
		t.Errorf("a directory of credential files: %q", got)
	}
	if got := ok2(t, list, map[string]any{"max_entries": 6}); got != want {
		t.Errorf("at the entry limit:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteFileRefusesProtectedPaths(t *testing.T) {
	root, protect := secretsFixture(t)
	write := &builtin.WriteFileTool{Root: root, Protect: protect}
	for _, p := range []string{"state/new.txt", "link-state/new.txt", "credentials.json", "keys/new.creds", "deploy/new.pem", ".tah/node.json"} {
		res := run(t, write, map[string]any{"path": p, "content": "x"})
		if !res.IsError || !strings.Contains(res.Output, "is not writable by tools: protected by the node") {
			t.Errorf("write_file %q: %s %q", p, res.Code, res.Output)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "state", "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write_file wrote into the data directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "credentials.json")); string(b) != credential {
		t.Errorf("write_file replaced a credential file: %q", b)
	}
	if res := run(t, write, map[string]any{"path": "notes/new.txt", "content": "x"}); res.IsError {
		t.Errorf("an ordinary write: %s", res.Output)
	}
}

func TestRootInsideTheDataDirectory(t *testing.T) {
	root, protect := secretsFixture(t)
	inner := filepath.Join(root, "state", "nats")
	for _, tool := range []tools.Tool{&builtin.ReadFileTool{Root: inner, Protect: protect}, &builtin.ListFilesTool{Root: inner, Protect: protect}} {
		for _, p := range []string{".", "jetstream/meta.inf"} {
			refused(t, tool, p, run(t, tool, map[string]any{"path": p}))
		}
	}
}

func TestSecretPatternsWithoutConfiguration(t *testing.T) {
	root, _ := secretsFixture(t)
	read := builtin.ReadFile(root) // no Protect: the patterns alone
	for _, p := range []string{"credentials.json", ".tah/credentials.json", "keys/user.creds", "innocent.txt"} {
		refused(t, read, p, run(t, read, map[string]any{"path": p}))
	}
	if res := run(t, read, map[string]any{"path": "state/other.txt"}); res.IsError {
		t.Errorf("without a data directory, state/ is an ordinary directory: %s", res.Output)
	}
	missing := &builtin.ReadFileTool{Root: root, Protect: builtin.Protect{DataDir: filepath.Join(root, "not-yet")}}
	if res := run(t, missing, map[string]any{"path": "README.md"}); res.IsError {
		t.Errorf("a data directory not created yet: %s", res.Output)
	}
}

func TestValidatePatterns(t *testing.T) {
	if err := builtin.ValidatePatterns([]string{"*.pem", "config/prod/*", "[a-c]*.key"}); err != nil {
		t.Errorf("good patterns: %v", err)
	}
	for _, bad := range [][]string{{"[a-"}, {""}} {
		if err := builtin.ValidatePatterns(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
