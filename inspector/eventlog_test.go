package inspector_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rowTypeRE = regexp.MustCompile(`<tr id="e-\d+-\d+" data-type="([^"]+)">`)

// The session's log, event by event, from the header's count, filtered by
// type or family; and a search that finds a session by the words of a
// message that is not its title.
func TestEventLogAndContentSearch(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	b := newBrowser(t, n.base)
	_, loc := b.post("/", "/new", url.Values{"text": {"hello"}})
	sid, err := sessionOf(loc)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	if code, loc := b.post("/s/"+sid, "/s/"+sid+"/send", url.Values{"text": {"a zebra crossing, please"}}); code != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("turn 2: %d %q", code, loc)
	}
	page := b.waitFor("/s/"+sid, `Turn 2 <span class="badge completed">`, time.Minute)
	if !strings.Contains(page, `href="/s/`+sid+`/events"`) {
		t.Errorf("the header's event count does not link to the log")
	}
	count, err := strconv.Atoi(strings.ReplaceAll(eventCount(b, "/s/"+sid), ",", ""))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("event log", func(t *testing.T) {
		code, all := b.get("/s/" + sid + "/events")
		types := rowTypeRE.FindAllStringSubmatch(all, -1)
		if code != http.StatusOK || len(types) != count || types[0][1] != "session.created" {
			t.Fatalf("the log: %d, %d rows for %d events:\n%s", code, len(types), count, all)
		}
		for filter, want := range map[string]int{"llm.completed": strings.Count(all, `data-type="llm.completed"`), "turn.": 2, "tool.finished": strings.Count(all, `data-type="tool.finished"`)} {
			_, body := b.get("/s/" + sid + "/events?type=" + url.QueryEscape(filter))
			rows := rowTypeRE.FindAllStringSubmatch(body, -1)
			if len(rows) != want || want == 0 {
				t.Errorf("filter %s: %d rows, want %d", filter, len(rows), want)
			}
			for _, r := range rows {
				if !strings.HasPrefix(r[1], filter) {
					t.Errorf("filter %s shows a %s", filter, r[1])
				}
			}
		}
		if code, _ := b.get("/s/s_00000000000000000000/events"); code != http.StatusNotFound {
			t.Errorf("the log of an unknown session: %d", code)
		}
	})

	t.Run("content search", func(t *testing.T) {
		_, body := b.get("/?q=" + url.QueryEscape("ZEBRA crossing"))
		if !strings.Contains(body, "/s/"+sid) || !regexp.MustCompile(`class="muted snippet">[^<]*zebra crossing`).MatchString(body) {
			t.Errorf("a search of a later turn's words does not find the session, or says not where:\n%s", body)
		}
		if _, body := b.get("/?q=" + url.QueryEscape("giraffe")); strings.Contains(body, "/s/"+sid) {
			t.Error("a search of words nowhere finds the session")
		}
	})
}
