package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/cmd/node/nodecmd"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// redactKeyEnv names the variable that holds the provider's API key here.
const redactKeyEnv = "TAH_TEST_REDACT_KEY"

// A node whose provider repeats the request's API key in its 401 answer (some
// OpenAI-compatible servers do): the key shows nowhere a client, an observer
// or an operator looks, for either provider: tahctl send's output, tahctl
// events, show and list, the turn's outcome, the events tah.api.events
// serves, the read model's summary and steps, the inspector's page, the
// node's log. Each place shows the failure, redacted.
func TestProviderKeyIsRedactedEverywhere(t *testing.T) {
	for _, c := range []struct {
		provider string
		enc      llmtest.Encoder
	}{{llm.ProviderOpenAI, llmtest.OpenAI{}}, {llm.ProviderAnthropic, llmtest.Anthropic{}}} {
		t.Run(c.provider, func(t *testing.T) { keyRedactedEverywhere(t, c.provider, c.enc) })
	}
}

func keyRedactedEverywhere(t *testing.T, provider string, enc llmtest.Encoder) {
	// Of no known shape: only the provider's knowledge of its key finds it
	// where the server repeats it by itself.
	const key = "tah-test-provider-key-5d2e8a91"
	t.Setenv(redactKeyEnv, key)
	refused := llmtest.Answer{Status: http.StatusUnauthorized, Message: "Incorrect API key provided", EchoKey: true}
	model := llmtest.NewServer(t, enc, refused, refused)

	dataDir := filepath.Join(t.TempDir(), ".tah")
	args := []string{"--data-dir", dataDir, "--tools-root", t.TempDir(), "--nats-port", "0", "--http", "127.0.0.1:0",
		"--llm-provider", provider, "--llm-model", "test-model", "--llm-base-url", model.URL,
		"--llm-api-key-env", redactKeyEnv, "--tools-remote=false", "--log-level", "debug"}
	stdout, stderr := redactOutputFile(t, "stdout"), redactOutputFile(t, "stderr")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- nodecmd.Run(ctx, args, stdout, stderr) }() // owned here: ends with cancel below
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("the node: %v", err)
			}
		}
	}
	defer stop()
	info := redactWaitNode(t, dataDir, ran)

	noKey := func(where, text string) {
		t.Helper()
		if strings.Contains(text, key) {
			t.Errorf("the key is in %s:\n%s", where, text)
		}
		if !strings.Contains(text, llm.Redacted) {
			t.Errorf("%s does not show the server's (redacted) answer:\n%s", where, text)
		}
	}
	tahctl := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		g := &globals{stdout: &out, stderr: &out, stdin: strings.NewReader(""), timeout: time.Minute,
			getenv: func(k string) string {
				if k == "NO_COLOR" {
					return "1"
				}
				return ""
			}}
		err := run(context.Background(), g, append([]string{"--data-dir", dataDir}, args...))
		report(&out, err)
		return out.String()
	}

	// tahctl send: the turn fails, and says why.
	sent := tahctl("send", "hello")
	noKey("tahctl send's output", sent)
	sid := sidRE.FindString(sent)
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()
	c, err := client.Connect(tctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(dataDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if sid == "" {
		l, err := c.List(tctx, wire.ListRequest{})
		if err != nil || len(l.Sessions) != 1 {
			t.Fatalf("the session: %+v, %v\n%s", l, err, sent)
		}
		sid = l.Sessions[0].ID
	}

	// A turn's outcome, as a client gets it.
	turn, err := c.Run(tctx, sid, wire.Input{Text: "again"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := turn.Outcome(tctx)
	turn.Close()
	if err != nil || out.Status != projection.StatusFailed {
		t.Fatalf("the second turn: %+v, %v", out, err)
	}
	b, _ := json.Marshal(out)
	noKey("the turn's outcome", string(b))

	// The events, as tah.api.events serves them to any reader.
	evs, err := c.Events(tctx, wire.EventsRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(evs)
	noKey("tah.api.events", string(b))
	for _, typ := range []string{"llm.failed", "agent.failed"} {
		if !strings.Contains(string(b), `"type":"`+typ+`"`) {
			t.Errorf("no %s among the events:\n%s", typ, b)
		}
	}

	// The read model, once it folded the second failure.
	var sum wire.SessionSummary
	for {
		sum, err = c.Get(tctx, sid)
		if err == nil && sum.Turn == 2 && sum.LastError != "" {
			break
		}
		select {
		case <-tctx.Done():
			t.Fatalf("the read model never showed the failed turn: %+v, %v", sum, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	b, _ = json.Marshal(sum)
	noKey("the read model's summary", string(b))
	steps, err := c.Steps(tctx, wire.StepsRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(steps)
	noKey("the read model's steps", string(b))

	noKey("tahctl events", tahctl("events", sid))
	noKey("tahctl events --json", tahctl("events", sid, "--json"))
	noKey("tahctl show", tahctl("show", sid))
	noKey("tahctl show --json", tahctl("show", sid, "--json"))
	if list := tahctl("list", "--json"); strings.Contains(list, key) {
		t.Errorf("the key is in tahctl list:\n%s", list)
	}

	// The inspector's page of the session.
	resp, err := http.Get("http://" + info.HTTP + "/s/" + sid)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the inspector: %s\n%s", resp.Status, page)
	}
	noKey("the inspector's page", string(page))

	if n := model.Count(); n != 2 {
		t.Errorf("the provider saw %d requests, want 2", n)
	}
	for _, r := range model.Requests() {
		if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), key) {
			t.Errorf("the key did not reach the provider: %v", r.Header)
		}
	}

	c.Close()
	stop()
	noKey("the node's log", redactReadFile(t, stderr)+redactReadFile(t, stdout))
}

func redactOutputFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func redactReadFile(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// redactWaitNode waits for the node to write node.json, failing if it stops first.
func redactWaitNode(t *testing.T, dataDir string, ran <-chan error) localnode.NodeInfo {
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
