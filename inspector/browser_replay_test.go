package inspector_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Replay in a real browser (issue 30): a session's page replays it against
// the node's agent, identical; with another system prompt typed in its
// form, the replay page says where it diverged and shows the two requests
// side by side, the system message differing; "Replay and continue live"
// with another model diverges on the model and makes a live session, which
// the page links to: its turn completes with the demo model's answer, its
// page names the session it replays, and the list marks it as a replay.
// Screenshot: replay.png.
func TestBrowserReplay(t *testing.T) {
	bin := chromiumPath(t)
	n := startNode(t, "127.0.0.1:0", 0, "--system-prompt", "You read projects.")
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#new-text"))
	do("a turn", chromedp.SendKeys("#new-text", "what is in this project?"), chromedp.Submit("#new-text"))
	wait("the turn completes", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed"`)
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	sid, err := sessionOf(strings.TrimPrefix(loc, n.base))
	if err != nil {
		t.Fatalf("%v: %q", err, loc)
	}

	do("replay as the node's agent", chromedp.Click("#replay-card > summary"), chromedp.Click("#replay"))
	wait("identical", `location.pathname === "/s/`+sid+`/replay" &&
		document.querySelector("#verdict")?.textContent.includes("identical over 1 turn, 3 LLM steps") &&
		!document.querySelector("#side-by-side") && !document.querySelector("#live")`)

	do("another system prompt", chromedp.Navigate(n.base+"/s/"+sid), chromedp.Click("#replay-card > summary"),
		chromedp.SendKeys("#replay-prompt", "You read projects, tersely."), chromedp.Click("#replay"))
	wait("it diverges at the system message, side by side", `(() => {
		const rows = [...document.querySelectorAll("#side-by-side tbody tr")];
		const cells = r => [...r.querySelectorAll("td")].map(c => c.textContent.trim());
		return document.querySelector("#verdict")?.textContent.includes("diverged at turn 1, LLM step 1") &&
			rows.length === 1 && rows[0].classList.contains("differs") &&
			cells(rows[0])[0] === "0" && cells(rows[0])[1].startsWith("system") && cells(rows[0])[1].endsWith("content differs") &&
			cells(rows[0])[2] === "You read projects." && cells(rows[0])[3] === "You read projects, tersely." &&
			document.querySelector("#replay-definition")?.textContent.includes("another system prompt")
	})()`)
	shot("replay.png")

	do("another model, live", chromedp.Navigate(n.base+"/s/"+sid), chromedp.Click("#replay-card > summary"),
		chromedp.SendKeys("#replay-model", "other-model"), chromedp.Click("#replay-live"))
	wait("it diverges on the model, the messages the same, and links the live session", `(() => {
		const rows = [...document.querySelectorAll("#side-by-side tbody tr")];
		const model = document.querySelector('#diffs tr[data-what="model"]');
		return document.querySelector("#verdict")?.textContent.includes("diverged at turn 1, LLM step 1") &&
			rows.length === 2 && rows.every(r => r.classList.contains("same")) &&
			model?.textContent.includes("other-model") &&
			document.querySelector("#live-link")?.getAttribute("href").startsWith("/s/s_")
	})()`)
	do("the live session", chromedp.Click("#live-link"))
	wait("its turn runs the recorded message again, with the tools, and completes, a replay of the session", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed" &&
		document.querySelector("#turn-1 .input")?.textContent.includes("what is in this project?") &&
		document.querySelectorAll("#turn-1 .step.tool").length === 2 &&
		document.querySelector("#turn-1 .step.llm:last-child .md")?.textContent.includes("README") &&
		document.querySelector("#replay-of a")?.getAttribute("href") === "/s/`+sid+`"`)
	live, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	liveID, err := sessionOf(strings.TrimPrefix(live, n.base))
	if err != nil || liveID == sid {
		t.Fatalf("the live session %q: %v", liveID, err)
	}

	do("the list", chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#rows"))
	wait("the live session marked as a replay", `(() => {
		const row = id => document.querySelector('#rows td:first-child > a[href="/s/' + id + '"]')?.closest("tr");
		return row("`+liveID+`")?.querySelector(".replay a.replay-of")?.getAttribute("href") === "/s/`+sid+`" &&
			row("`+sid+`") && !row("`+sid+`").querySelector(".replay")
	})()`)
}
