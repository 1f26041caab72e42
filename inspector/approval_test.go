package inspector_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestApprovalButtons: a call that waits for approval shows on the session
// page with Approve and Deny; the first turn's is denied with a note the
// model is told, the second's approved, and the turns complete.
func TestApprovalButtons(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond, "--tools-approval", "list_files=always")
	b := newBrowser(t, n.base)
	code, loc := b.post("/", "/new", url.Values{"text": {example}})
	sid, err := sessionOf(loc)
	if code != http.StatusSeeOther || err != nil {
		t.Fatalf("new session: %d %q (%v)", code, loc, err)
	}
	page := b.waitFor("/s/"+sid, `Waiting for approval`, time.Minute)
	call := regexp.MustCompile(`name="call" value="([^"]+)"`).FindStringSubmatch(page)
	if call == nil || !strings.Contains(page, "<code>list_files</code>") {
		t.Fatalf("the pending call is not shown:\n%s", page)
	}
	code, loc = b.post("/s/"+sid, "/s/"+sid+"/deny", url.Values{"call": {call[1]}, "note": {"not this one"}})
	if code != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("deny: %d %q", code, loc)
	}
	// The demo model answers with the denial; the next turn's call is approved.
	b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	if code, loc = b.post("/s/"+sid, "/s/"+sid+"/send", url.Values{"text": {example}}); code != http.StatusSeeOther {
		t.Fatalf("send: %d %q", code, loc)
	}
	page = b.waitFor("/s/"+sid, `Waiting for approval`, time.Minute)
	next := regexp.MustCompile(`name="call" value="([^"]+)"`).FindStringSubmatch(page)
	if next == nil || next[1] == call[1] {
		t.Fatalf("no new call waits:\n%s", page)
	}
	code, loc = b.post("/s/"+sid, "/s/"+sid+"/approve", url.Values{"call": {next[1]}})
	if code != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("approve: %d %q", code, loc)
	}
	b.waitFor("/s/"+sid, `Turn 2 <span class="badge completed">`, time.Minute)
	// A second approval of the same call is told it was decided.
	_, loc = b.post("/s/"+sid, "/s/"+sid+"/approve", url.Values{"call": {next[1]}})
	if !strings.Contains(loc, "already_decided") {
		t.Fatalf("a second approval: %q", loc)
	}
}
