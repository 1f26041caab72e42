package inspector_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The specification's example: the demo model lists the files, reads the
// README, then answers.
const example = "分析这个项目的目录结构"

// A turn's tokens in its heading; the session's in the page's header.
var (
	turnTokensRE    = regexp.MustCompile(`class="muted tokens"[^>]*>([^<]+)<`)
	sessionTokensRE = regexp.MustCompile(`<dt>Tokens</dt><dd>([^<]+)<`)
)

func TestPagesAndActions(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	b := newBrowser(t, n.base)
	if code, body := b.get("/"); code != http.StatusOK || !strings.Contains(body, "<h1>Sessions</h1>") {
		t.Fatalf("the list: %d\n%s", code, body)
	}

	code, loc := b.post("/", "/new", url.Values{"text": {example}})
	sid, err := sessionOf(loc)
	if code != http.StatusSeeOther || err != nil {
		t.Fatalf("new session: %d %q (%v)", code, loc, err)
	}
	page := b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	for _, want := range []string{example, `<span class="kind">list_files</span>`, `<span class="kind">read_file</span>`, "A small project", "/request/llm1.1"} {
		if !strings.Contains(page, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	if _, req := b.get("/s/" + sid + "/request/llm1.1"); !strings.Contains(req, "verified") || !strings.Contains(req, "list_files") {
		t.Errorf("the exact request:\n%s", req)
	}

	t.Run("search", func(t *testing.T) {
		for _, q := range []string{"目录结构", sid} {
			if _, body := b.get("/?q=" + url.QueryEscape(q)); !strings.Contains(body, "/s/"+sid) {
				t.Errorf("searching %q does not find the session", q)
			}
		}
		if _, body := b.get("/?q=nothing-like-it"); strings.Contains(body, "/s/"+sid) || !strings.Contains(body, "No sessions match") {
			t.Errorf("a search that matches nothing:\n%s", body)
		}
		if _, body := b.get("/?status=failed"); strings.Contains(body, "/s/"+sid) {
			t.Error("the failed filter lists a completed session")
		}
		if _, rows := b.get("/rows"); !strings.Contains(rows, "/s/"+sid) || strings.Contains(rows, "<html") {
			t.Errorf("the live rows:\n%s", rows)
		}
	})

	t.Run("fork", func(t *testing.T) {
		code, loc := b.post("/s/"+sid, "/s/"+sid+"/fork", url.Values{"turns": {"1"}})
		fork, err := sessionOf(loc)
		if code != http.StatusSeeOther || err != nil || fork == sid || !strings.Contains(loc, "forked+from") {
			t.Fatalf("fork: %d %q", code, loc)
		}
		if _, body := b.get(loc); !strings.Contains(body, "Forked from") || !strings.Contains(body, "/s/"+sid) {
			t.Errorf("the fork's page:\n%s", body)
		}
	})

	t.Run("compact", func(t *testing.T) {
		before := b.waitFor("/s/"+sid, "completed", time.Minute)
		_, loc := b.post("/s/"+sid, "/s/"+sid+"/compact", url.Values{})
		if !strings.Contains(loc, "ok=") {
			t.Fatalf("compact: %q", loc)
		}
		page := b.waitFor("/s/"+sid, `<span class="kind">compaction</span>`, time.Minute)
		turn1, session := turnTokensRE.FindStringSubmatch(page), sessionTokensRE.FindStringSubmatch(page)
		if turn1 == nil || session == nil || !strings.Contains(before, turn1[0]) || turn1[1] == session[1] || !strings.Contains(page, "context compacted") {
			t.Errorf("turn 1's tokens %q (the session's %q) changed with a compaction between turns, or are the session's, or its note is missing:\n%s", turn1, session, page)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		if code, body := b.get("/s/s_00000000000000000000"); code != http.StatusNotFound || !strings.Contains(body, "not found") {
			t.Errorf("an unknown session: %d\n%s", code, body)
		}
		if code, body := b.postRaw("/new", url.Values{"text": {"x"}}, nil); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("a POST without its CSRF token: %d %s", code, body)
		}
		if code, body := b.postRaw("/new", url.Values{"text": {"x"}}, http.Header{"Origin": {"https://evil.example"}}); code != http.StatusForbidden || !strings.Contains(body, "another site") {
			t.Errorf("a POST from another site: %d %s", code, body)
		}
		if code := reboundStatus(t, n.base+"/"); code != http.StatusForbidden {
			t.Errorf("a rebound host name: %d", code)
		}
		_, loc := b.post("/s/"+sid, "/s/"+sid+"/resume", url.Values{})
		if !strings.Contains(loc, "err=") || !strings.Contains(loc, "resume") || !strings.Contains(loc, "code=nothing_to_resume") {
			t.Errorf("resuming a finished turn: %q", loc)
		}
		if _, body := b.get(loc); !strings.Contains(body, "<code>nothing_to_resume</code>") {
			t.Errorf("the failure code is not shown:\n%s", body)
		}
		unknown := "/s/s_00000000000000000000"
		if _, loc := b.post("/", unknown+"/send", url.Values{"text": {"x"}}); !strings.Contains(loc, "code=unknown_session") {
			t.Errorf("a turn of an unknown session: %q", loc)
		}
	})
}

// A node whose HTTP address is not loopback asks for its token, which it
// wrote 0600 into its data directory; nothing is done without it.
func TestLogin(t *testing.T) {
	n := startNode(t, "0.0.0.0:0", time.Millisecond)
	path := filepath.Join(n.dir, "ui.token")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ui.token: %v %v", fi, err)
	}
	tok, _ := os.ReadFile(path)
	b := newBrowser(t, n.base)
	if code, loc := b.postRaw("/new", url.Values{"text": {"x"}}, nil); code != http.StatusUnauthorized {
		t.Errorf("a POST without a login: %d %s", code, loc)
	}
	for _, path := range []string{"/rows", "/s/s_00000000000000000000/artifacts/art_1"} {
		if code, _ := b.get(path); code != http.StatusSeeOther && code != http.StatusUnauthorized {
			t.Errorf("%s without a login: %d", path, code)
		}
	}
	code, body := b.post("/login", "/login", url.Values{"token": {"wrong"}, "next": {"/"}})
	if code != http.StatusUnauthorized || !strings.Contains(body, "Wrong token") || !strings.Contains(body, path) {
		t.Fatalf("a wrong token: %d\n%s", code, body)
	}
	if code, _ := b.get("/"); code != http.StatusSeeOther {
		t.Fatalf("the list after a wrong token: %d", code)
	}
	code, loc := b.post("/login", "/login", url.Values{"token": {string(tok)}, "next": {"//evil.example/"}})
	if code != http.StatusSeeOther || loc != "/" {
		t.Fatalf("the right token: %d %q", code, loc)
	}
	if code, body := b.get("/"); code != http.StatusOK || !strings.Contains(body, "Log out") {
		t.Fatalf("the list after the login: %d", code)
	}
	if code, _ := b.post("/", "/logout", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := b.get("/"); code != http.StatusSeeOther {
		t.Errorf("the list after logout: %d", code)
	}
}

// A session's live stream, read as a browser's EventSource reads it: the
// blocks changed since the page's sequence, then a new turn's blocks and
// token deltas as they come.
func TestLiveStream(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", 20*time.Millisecond)
	b := newBrowser(t, n.base)
	_, loc := b.post("/", "/new", url.Values{"text": {"hello"}})
	sid, err := sessionOf(loc)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/s/"+sid+"/live?from=0", nil)
	r, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if ct := r.Header.Get("Content-Type"); r.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("live: %d %s", r.StatusCode, ct)
	}
	lines := bufio.NewScanner(r.Body)
	lines.Buffer(nil, 1<<20)
	// expect reads events until each of want (an event's name and a part
	// of its data) came, in any order: deltas are core NATS messages that
	// may pass the log's events.
	expect := func(want ...[2]string) {
		t.Helper()
		for lines.Scan() && len(want) > 0 {
			name, ok := strings.CutPrefix(lines.Text(), "event: ")
			if !ok || !lines.Scan() {
				continue
			}
			want = slices.DeleteFunc(want, func(w [2]string) bool { return w[0] == name && strings.Contains(lines.Text(), w[1]) })
		}
		if len(want) > 0 {
			t.Fatalf("the stream ended before the events %q: %v", want, lines.Err())
		}
	}
	expect([2]string{"block", `turn-1`}, [2]string{"head", `completed`})
	if code, loc := b.post("/s/"+sid, "/s/"+sid+"/send", url.Values{"text": {"again"}}); code != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("the next turn: %d %s", code, loc)
	}
	expect([2]string{"block", `turn-2`}, [2]string{"delta", `"step":"llm`}, [2]string{"head", `"seq"`})
	b.waitFor("/s/"+sid, `Turn 2 <span class="badge completed">`, time.Minute)
}
