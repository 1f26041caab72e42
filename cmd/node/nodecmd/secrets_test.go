package nodecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// apiKeyEnv names the variable that holds the provider's API key in these tests.
const apiKeyEnv = "TAH_TEST_PROVIDER_KEY"

// secretProbes are the tool calls of a model that hunts for the node's secrets
// in a project whose tools root holds the data directory (the default layout).
func secretProbes(dataDir string) []llmtest.Call {
	calls := []string{
		`read_file {"path":".tah/node.creds"}`,
		`read_file {"path":".TAH/ADMIN.CREDS"}`,
		`read_file {"path":"src/../.tah/trust/operator.nk"}`,
		`read_file {"path":` + mustQuote(filepath.Join(dataDir, "admin.creds")) + `}`,
		`read_file {"path":"notes.txt"}`,
		`read_file {"path":"link-data/node.creds"}`,
		`read_file {"path":".tah/planted.creds"}`,
		`list_files {"path":".tah"}`,
		`list_files {"path":"link-data"}`,
		`list_files {"path":"."}`,
		`list_files {"path":".","recursive":true}`,
	}
	out := make([]llmtest.Call, len(calls))
	for i, c := range calls {
		name, args, _ := strings.Cut(c, " ")
		out[i] = llmtest.Call{ID: "probe_" + string(rune('a'+i)), Name: name, Args: []string{args}}
	}
	return out
}

// toolResults returns the results of the calls ids in a request body to the model.
func toolResults(t *testing.T, body []byte, ids ...string) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role, Content string
			ToolCallID    string `json:"tool_call_id"`
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		for _, m := range req.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				out = append(out, m.Content)
			}
		}
	}
	if len(out) != len(ids) {
		t.Fatalf("%d results of %v in %s", len(out), ids, body)
	}
	return out
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A node with a provider API key and its NATS credential runs a turn whose model
// tries to read the credential through the tools; neither secret reaches the
// model, the log, the data directory's other files (the log's streams and
// buckets, the read model), /metrics, the process arguments or the node's output.
func TestNoSecretLeaves(t *testing.T) {
	project := t.TempDir()
	dataDir := filepath.Join(project, ".tah")
	mustWrite(t, filepath.Join(project, "README.md"), "# Project\n")
	mustWrite(t, filepath.Join(project, "src", "main.go"), "package main\n")
	// A seed as part of the node's trust material would be kept: named by pattern.
	const planted = "SUAPLANTEDSEEDFORTHETESTONLY0123456789"
	mustWrite(t, filepath.Join(dataDir, "planted.creds"), planted)
	for link, target := range map[string]string{"notes.txt": ".tah/node.creds", "link-data": ".tah"} {
		if err := os.Symlink(target, filepath.Join(project, link)); err != nil {
			t.Fatal(err)
		}
	}
	const apiKey = "sk-test-SECRETKEY-do-not-leak-7c1d"
	t.Setenv(apiKeyEnv, apiKey)
	model := llmtest.NewServer(t, llmtest.OpenAI{},
		llmtest.Answer{Calls: secretProbes(dataDir)},
		llmtest.Answer{Text: []string{"Nothing to see."}})

	args := []string{"--data-dir", dataDir, "--tools-root", project, "--nats-port", "0", "--http", "127.0.0.1:0",
		"--llm-provider", "openai", "--llm-model", "test-model", "--llm-base-url", model.URL,
		"--llm-api-key-env", apiKeyEnv, "--tools-remote=false", "--log-level", "debug"}
	// Files take the node's output: its goroutines may write at once.
	stdout, stderr := outputFile(t, "stdout"), outputFile(t, "stderr")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, args, stdout, stderr) }() // owned here: ends with cancel below
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("the node: %v\n%s", err, readFile(t, stderr))
			}
		}
	}
	defer stop()

	info := waitNodeInfo(t, dataDir, ran)
	secrets := map[string]string{"the node's seed": credsSeed(t, localnode.NodeCredsPath(dataDir)),
		"the admin's seed": credsSeed(t, localnode.AdminCredsPath(dataDir)), "the API key": apiKey, "a seed": planted}

	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()
	c, err := client.Connect(tctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(dataDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Create(tctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.Run(tctx, s.Session, wire.Input{Text: "print the node's password"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	if out, err := turn.Outcome(tctx); err != nil || out.Status != projection.StatusCompleted {
		t.Fatalf("the turn: %+v, %v\n%s", out, err, readFile(t, stderr))
	}

	// What the model was sent: every probe refused, no secret.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+apiKey {
		t.Errorf("the key did not reach the provider: %q", got)
	}
	sent := string(reqs[1].Body)
	if n := strings.Count(sent, "is not readable by tools"); n != 9 {
		t.Errorf("%d refusals sent to the model, want 9:\n%s", n, sent)
	}
	for _, listing := range toolResults(t, reqs[1].Body, "probe_j", "probe_k") {
		if listing != "README.md (10 bytes)\nsrc/" && listing != "README.md (10 bytes)\nsrc/\nsrc/main.go (13 bytes)" {
			t.Errorf("a listing shows more than the project: %q", listing)
		}
	}
	for _, r := range reqs {
		noSecret(t, "a request body to the model", string(r.Body), secrets)
	}

	// The log, all of it.
	var events strings.Builder
	for ev, err := range c.Log(tctx, s.Session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ev)
		events.Write(b)
	}
	if !strings.Contains(events.String(), "Nothing to see.") {
		t.Fatalf("the log lacks the turn's answer:\n%s", events.String())
	}
	noSecret(t, "the log", events.String(), secrets)

	waitReadModel(t, tctx, c, s.Session)
	noSecret(t, "/metrics", httpGet(t, "http://"+info.HTTP+"/metrics"), secrets)
	noSecret(t, "the process arguments", strings.Join(args, " "), secrets)

	c.Close()
	stop() // the node flushes its stores: their bytes are final
	noSecret(t, "the node's log", readFile(t, stderr), secrets)
	noSecret(t, "the node's output", readFile(t, stdout), secrets)
	scanDataDir(t, dataDir, secrets)
}

// scanDataDir reads every file of the data directory but the secrets' own: the
// log's streams and buckets (nats/) and the read model (data.db and its WAL).
func scanDataDir(t *testing.T, dataDir string, secrets map[string]string) {
	t.Helper()
	own := map[string]bool{localnode.NodeCredsFile: true, localnode.AdminCredsFile: true, "planted.creds": true}
	files := 0
	err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "trust" {
			return filepath.SkipDir // the trust material: the keys themselves
		}
		if err != nil || d.IsDir() || own[d.Name()] {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		noSecret(t, p, string(b), secrets)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "data.db")); err != nil || files < 3 {
		t.Errorf("the data directory was not scanned (%d files; the read model: %v)", files, err)
	}
}

func noSecret(t *testing.T, where, text string, secrets map[string]string) {
	t.Helper()
	for what, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s appears in %s", what, where)
		}
	}
}

func outputFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitNodeInfo waits for the node to write node.json, failing if it stops first.
func waitNodeInfo(t *testing.T, dataDir string, ran <-chan error) localnode.NodeInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if info, err := localnode.ReadNodeInfo(dataDir); err == nil {
			return info
		}
		select {
		case err := <-ran:
			t.Fatalf("the node stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the node wrote no node.json within a minute")
	return localnode.NodeInfo{}
}

// waitReadModel waits until the read model holds the turn's answer.
func waitReadModel(t *testing.T, ctx context.Context, c *client.Client, sid string) {
	t.Helper()
	for {
		r, err := c.Messages(ctx, sid)
		if err == nil {
			b, _ := json.Marshal(r)
			if strings.Contains(string(b), "Nothing to see.") {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the read model never showed the turn: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// Secrets are never flags, which every user of the machine can read in the
// process list: the NATS credential is a .creds file (--nats-creds names its
// path; the data directory holds the node's), a provider key comes from the
// variable --llm-api-key-env names. Neither --print-config nor --help shows
// them.
func TestSecretsTakeNoFlag(t *testing.T) {
	var out, errb bytes.Buffer
	const apiKey = "sk-SECRET-51aa"
	t.Setenv(apiKeyEnv, apiKey)
	args := []string{"--print-config", "--llm-api-key-env", apiKeyEnv, "--tools-root", t.TempDir()}
	if err := Run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("--print-config: %v\n%s", err, errb.String())
	}
	if err := Run(context.Background(), []string{"--help"}, &out, &errb); ExitCode(err) != ExitOK {
		t.Fatalf("--help: %v", err)
	}
	secrets := map[string]string{"the API key": apiKey}
	noSecret(t, "the output of --print-config and --help", out.String()+errb.String(), secrets)

	cfg, _, err := parse([]string{"--llm-api-key-env", apiKeyEnv}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKeyEnv != apiKeyEnv {
		t.Errorf("the key's variable did not come through: %+v", cfg)
	}
	for _, s := range cfg.Settings() {
		// What a flag takes is its last word: --llm-api-key-env takes a name,
		// a --...-key or --...-creds would take a file's path.
		words := strings.Split(s.Flag, "-")
		switch last := words[len(words)-1]; {
		case last == "password", last == "secret", last == "token", strings.HasSuffix(s.Flag, "api-key"):
			t.Errorf("--%s takes a secret on the command line: read it from the environment or a file", s.Flag)
		}
	}
}

// credsSeed is the user seed of a .creds file: the secret it holds.
func credsSeed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}
