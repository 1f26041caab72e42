package inspector_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Replay in a real browser (issue 30): on a node whose turns stop at
// max_steps 2, a session's page replays it against the node's agent,
// identical; with another system prompt typed in its form, the replay page
// says where it diverged and shows the two requests side by side, the
// system message differing; another model differs in the model, the
// messages the same; "Replay and continue live" with 3 steps diverges
// where the recorded turn stopped and makes a live session, which the page
// links to: its turn runs on from the recorded tool results and completes
// with the demo model's answer, its page names the session it replays, and
// the list marks it as a replay. Screenshot: replay.png.
func TestBrowserReplay(t *testing.T) {
	bin := chromiumPath(t)
	n := startNode(t, "127.0.0.1:0", 0, "--system-prompt", "You read projects.", "--max-steps", "2")
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#new-text"))
	do("a turn", chromedp.SendKeys("#new-text", "what is in this project?"), chromedp.Submit("#new-text"))
	wait("the turn stops at max_steps", `document.querySelector("#turn-1 h2 .badge")?.textContent === "failed" &&
		document.querySelectorAll("#turn-1 .step.tool").length === 2`)
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	sid, err := sessionOf(strings.TrimPrefix(loc, n.base))
	if err != nil {
		t.Fatalf("%v: %q", err, loc)
	}
	// The form is on the replay's page too, open, as last asked: each try
	// after the first is made there.
	replay := func(what, button string, fill ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		wait("the form emptied", `["replay-prompt", "replay-model", "replay-max-steps"].every(id => { document.getElementById(id).value = ""; return true })`)
		do(what, append(fill, chromedp.Click(button))...)
	}

	do("the form", chromedp.Click("#replay-card > summary"))
	replay("replay as the node's agent", "#replay")
	wait("identical", `location.pathname === "/s/`+sid+`/replay" &&
		document.querySelector("#verdict")?.textContent.includes("identical over 1 turn, 2 LLM steps") &&
		!document.querySelector("#side-by-side") && !document.querySelector("#live")`)

	replay("another system prompt", "#replay", chromedp.SendKeys("#replay-prompt", "You read projects, tersely."))
	wait("it diverges at the system message, side by side", `(() => {
		const rows = [...document.querySelectorAll("#side-by-side tbody tr")];
		const cells = r => [...r.querySelectorAll("td")].map(c => c.textContent.trim());
		return document.querySelector("#verdict")?.textContent.includes("diverged at turn 1, LLM step 1") &&
			rows.length === 1 && rows[0].classList.contains("differs") &&
			cells(rows[0])[0] === "0" && cells(rows[0])[1].startsWith("system") && cells(rows[0])[1].endsWith("content differs") &&
			cells(rows[0])[2] === "You read projects." && cells(rows[0])[3] === "You read projects, tersely." &&
			document.querySelector("#replay-definition")?.textContent.includes("another system prompt") &&
			document.querySelector("#replay-card").open && document.querySelector("#replay-prompt").value === "You read projects, tersely."
	})()`)
	shot("replay.png")

	replay("another model", "#replay", chromedp.SendKeys("#replay-model", "other-model"))
	wait("it diverges in the model, the messages the same", `(() => {
		const rows = [...document.querySelectorAll("#side-by-side tbody tr")];
		return document.querySelector("#verdict")?.textContent.includes("diverged at turn 1, LLM step 1") &&
			rows.length === 2 && rows.every(r => r.classList.contains("same")) &&
			document.querySelector('#diffs tr[data-what="model"]')?.textContent.includes("other-model")
	})()`)

	replay("3 steps, live", "#replay-live", chromedp.SendKeys("#replay-max-steps", "3"))
	wait("it diverges where the turn stopped, and links the live session, run on from the step before", `(() => {
		return document.querySelector("#verdict")?.textContent.includes("diverged at turn 1, LLM step 3") &&
			document.querySelector('#diffs tr[data-what="max_steps"]')?.textContent.includes("3") &&
			document.querySelector("#live")?.textContent.includes("runs on from its step") &&
			document.querySelector("#live-link")?.getAttribute("href").startsWith("/s/s_")
	})()`)
	do("the live session", chromedp.Click("#live-link"))
	wait("its turn goes on from the recorded tool results and completes, a replay of the session", `document.querySelector("#status")?.textContent === "completed" &&
		document.querySelectorAll(".step.llm").length === 1 && document.querySelectorAll(".step.tool").length === 0 &&
		document.querySelector(".step.llm .md")?.textContent.includes("README") &&
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
