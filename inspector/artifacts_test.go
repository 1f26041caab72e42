package inspector_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var artifactRE = regexp.MustCompile(`href="(/s/[^"]+/artifacts/(art_[^"]+))"`)

// A tool output too large for the log is an artifact: the session page links
// it on its step and in its list, and the link downloads it whole, streamed
// through the client, with its type and a file name; an unknown one is a
// page that says so, and the host check holds for downloads too.
func TestArtifactDownload(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	bigReadme(t, n.root)
	b := newBrowser(t, n.base)
	_, loc := b.post("/", "/new", url.Values{"text": {example}})
	sid, err := sessionOf(loc)
	if err != nil {
		t.Fatalf("new session: %q (%v)", loc, err)
	}
	page := b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	links := artifactRE.FindAllStringSubmatch(page, -1)
	if len(links) != 2 || links[0][1] != links[1][1] || !strings.Contains(page, `<h2 id="arts-h">Artifacts</h2>`) {
		t.Fatalf("the artifact is not linked on its step and in the list: %q\n%s", links, page)
	}

	r, err := b.c.Get(n.base + links[0][1])
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("download: %d %v", r.StatusCode, err)
	}
	if ct, cd := r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"); !strings.HasPrefix(ct, "text/plain") || cd != `attachment; filename=output.txt` {
		t.Errorf("download headers: Content-Type %q, Content-Disposition %q", ct, cd)
	}
	if !strings.Contains(string(body), "line 000 of") || !strings.Contains(string(body), "line 599 of") {
		t.Errorf("the download is not the whole output (%d bytes)", len(body))
	}

	if r, err = b.c.Head(n.base + links[0][1]); err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Disposition") == "" {
		t.Errorf("HEAD of the download: %d %v", r.StatusCode, r.Header)
	}
	if code, body := b.get("/s/" + sid + "/artifacts/art_nope"); code != http.StatusNotFound || !strings.Contains(body, "no artifact art_nope") {
		t.Errorf("an unknown artifact: %d\n%s", code, body)
	}
	if code := reboundStatus(t, n.base+links[0][1]); code != http.StatusForbidden {
		t.Errorf("a download for a rebound host name: %d", code)
	}
}

// bigReadmeSize is the size of bigReadme's README: some 50 KB, over the 32
// KiB a tool output keeps whole, under the 64 KiB read_file returns.
const bigReadmeSize = 600 * 84

// bigReadme writes a README.md into root whose read_file output is an
// artifact.
func bigReadme(t *testing.T, root string) {
	t.Helper()
	var readme strings.Builder
	for i := range 600 {
		fmt.Fprintf(&readme, "line %03d of a README too large to keep whole in the log, so its read is an artifact\n", i)
	}
	if readme.Len() != bigReadmeSize {
		t.Fatalf("the README is %d bytes, not %d", readme.Len(), bigReadmeSize)
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(readme.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}
