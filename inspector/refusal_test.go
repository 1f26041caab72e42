package inspector_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// eventsRE is the header's count of the session's events.
var eventsRE = regexp.MustCompile(`<dt>Events</dt><dd>(?:<a[^>]*>)?([0-9,]+)<`)

// eventCount is the number of events page's header counts.
func eventCount(b *browser, page string) string {
	b.t.Helper()
	_, body := b.get(page)
	m := eventsRE.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no event count on %s:\n%s", page, body)
	}
	return m[1]
}

// Resume, cancel and compact of a session they cannot apply to are refused
// by the inspector from the session's log, and the log is left as it was:
// a resume sent to the node would load the session, and the load writes a
// session.claimed. A fork is a session no node has loaded yet.
func TestRefusedActionsWriteNothing(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	b := newBrowser(t, n.base)
	_, loc := b.post("/", "/new", url.Values{"text": {"hello"}})
	sid, err := sessionOf(loc)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	code, loc := b.post("/s/"+sid, "/s/"+sid+"/fork", url.Values{"turns": {"0"}})
	fork, err := sessionOf(loc)
	if code != http.StatusSeeOther || err != nil {
		t.Fatalf("fork: %d %q", code, loc)
	}
	page := "/s/" + fork
	before := eventCount(b, page)
	_, loc = b.post(page, page+"/resume", url.Values{})
	if !strings.Contains(loc, "code=nothing_to_resume") {
		t.Errorf("resume of a session with no unfinished turn: %q", loc)
	}
	_, loc = b.post(page, page+"/cancel", url.Values{})
	if !strings.Contains(loc, "nothing+to+cancel") {
		t.Errorf("cancel of a session that runs nothing: %q", loc)
	}
	_, loc = b.post(page, page+"/compact", url.Values{})
	if !strings.Contains(loc, "nothing+to+compact") {
		t.Errorf("compact of a session with no turn: %q", loc)
	}
	if after := eventCount(b, page); after != before {
		_, log := b.get(page + "/events")
		t.Errorf("the refused actions changed the log: %s events, then %s:\n%s", before, after, log)
	}
}
