package inspector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/cmd/node/nodecmd"
	"github.com/tah-dev/tah/internal/localnode"
)

// node is a tah-node run in-process (nodecmd.Run: the embedded NATS server
// on a free port, the data in t.TempDir(), the demo's mock model), as a
// person starts it, with the UI at base.
type node struct {
	dir  string
	root string // the tools' root: the demo model reads its README.md
	base string // http://127.0.0.1:PORT
}

// startNode runs tah-node with httpAddr (127.0.0.1:0: loopback, no login;
// 0.0.0.0:0: a login) until the end of the test. The mock streams its
// answers at pace; extra are more tah-node flags.
func startNode(t *testing.T, httpAddr string, pace time.Duration, extra ...string) *node {
	t.Helper()
	dir, root := filepath.Join(t.TempDir(), "data"), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("# demo\nA small project for the inspector's tests.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // owned here: ends when cancel is called at cleanup
		args := append([]string{"--data-dir", dir, "--nats-port", "0", "--http", httpAddr, "--tools-root", root,
			"--llm-mock-pace", pace.String(), "--log-level", "warn"}, extra...)
		done <- nodecmd.Run(ctx, args, io.Discard, testWriter{t})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tah-node: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := localnode.ReadNodeInfo(dir)
		if err == nil && info.HTTP != "" {
			return &node{dir: dir, root: root, base: "http://" + info.HTTP}
		}
		select {
		case err := <-done:
			t.Fatalf("tah-node ended before it was ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("tah-node did not write node.json within 30s")
		}
	}
}

// testWriter sends the node's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// browser is an HTTP client with cookies that does not follow redirects, so
// that a test sees where an action sends it.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get returns the status and the body of path.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	r, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// post submits a form from page (whose CSRF token it takes) and returns the
// status and where it redirects.
func (b *browser) post(page, path string, form url.Values) (int, string) {
	b.t.Helper()
	_, body := b.get(page)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token in %s:\n%s", page, body)
	}
	form.Set("csrf", m[1])
	return b.postRaw(path, form, nil)
}

func (b *browser) postRaw(path string, form url.Values, header http.Header) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	r, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer r.Body.Close()
	if loc := r.Header.Get("Location"); loc != "" {
		return r.StatusCode, loc
	}
	body, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(body)
}

// waitFor polls path until its body contains want.
func (b *browser) waitFor(path, want string, within time.Duration) string {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, body := b.get(path)
		if strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s did not show %q within %s:\n%s", path, want, within, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var errNoSession = errors.New("no session in the location")

// sessionOf is the session id of a location /s/<sid>?...
func sessionOf(loc string) (string, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return "", err
	}
	sid, ok := strings.CutPrefix(u.Path, "/s/")
	if !ok || sid == "" {
		return "", errNoSession
	}
	return sid, nil
}

// reboundStatus is the status of a GET of u under another host name, as a
// page of another site whose DNS name was rebound to the node would send.
func reboundStatus(t *testing.T, u string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}
