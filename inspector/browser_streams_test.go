package inspector_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// liveStreams reads the node's gauge of the UI's open live streams.
func liveStreams(t *testing.T, base string) int {
	t.Helper()
	r, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^tah_ui_live_streams (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no tah_ui_live_streams in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// A page left for another closes its live stream: in one tab, going from
// session page to session page leaves one stream open, the page's own.
// (A page kept in the browser's back/forward cache held its stream, and a
// browser opens six connections to a host at most: the next pages waited a
// minute each.)
func TestBrowserLeavesNoStreamOpen(t *testing.T) {
	bin := chromiumPath(t)
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	b := openChromium(t, bin)
	var pages []string
	for i := range 3 {
		b.do("the list", chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#new-text"))
		b.do("a session", chromedp.SendKeys("#new-text", fmt.Sprintf("hello %d", i)), chromedp.Submit("#new-text"))
		b.wait("its turn completes", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed"`)
		loc, err := chromedp.Run(b.ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, loc)
	}
	for i := range 7 { // more pages than a browser's connections to a host
		b.do("a session's page", chromedp.Navigate(pages[i%len(pages)]), chromedp.WaitVisible("#head"))
		b.wait("its stream is open", `document.body.dataset.live === "open"`)
		deadline := time.Now().Add(time.Minute) // catches a hang: a left page's stream closes at once
		for liveStreams(t, n.base) > 1 {
			if time.Now().After(deadline) {
				t.Fatalf("page %d: %d live streams open, want the page's own only: the pages left hold theirs", i, liveStreams(t, n.base))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
