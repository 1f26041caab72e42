package inspector_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// viewsScript is the model of TestBrowserViews: an answer in Markdown (with
// HTML that must not run) and large token counts, a failure, a call that
// waits for approval and the answer after it, a summary for a compaction,
// and a long answer that streams for a minute and then holds (a test
// cancels it).
func viewsScript(t *testing.T) string {
	t.Helper()
	slow := make([]string, 600)
	for i := range slow {
		slow[i] = "word" + strings.Repeat("x", i%7) + " "
	}
	slow[0] = "Beginning "
	script := map[string]any{"pace": "2ms", "replies": []map[string]any{
		{"compaction": true, "times": -1, "text": "- the user asked for Markdown, a failure and a listing"},
		{"prompt": "markdown please", "model": "mock-large", "usage": map[string]int{"input_tokens": 12345, "output_tokens": 6789},
			"text": "## Findings\n\n**Bold** point, `code` and a list:\n\n- first item\n- second item\n\n| tool | calls |\n|---|---|\n| list_files | 1 |\n\n" +
				"<script>window.pwned = 1</script>\n\n<img src=x onerror=\"window.pwned = 2\">\n\n[a link](javascript:window.pwned=3)"},
		{"prompt": "fail please", "error": map[string]any{"status": 400, "message": "the request was refused for the test"}},
		{"prompt": "list please", "after_tool": false, "tool_calls": []map[string]any{{"name": "list_files", "arguments": map[string]string{"path": "."}}}},
		{"prompt": "list please", "after_tool": true, "text": "The listing is in."},
		{"prompt": "slow please", "tokens": slow, "pace": "100ms", "hold": "10m"},
	}}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The inspector's views in a real browser: an answer rendered from Markdown
// without its raw HTML, the model, provider and tokens (with separators)
// of each step and its waterfall bar; a failed model step that does not
// wait for the model; a call that waits for approval, marked in the list,
// its arguments pretty-printed and edited on its card, and who decided and
// when in the timeline; a compaction with its summary; the actions that
// cannot apply disabled; a page opened mid-answer that says its beginning
// is missing; the event log filtered by type; a search by content.
// Screenshots: views.png, events.png, search.png.
func TestBrowserViews(t *testing.T) {
	bin := chromiumPath(t)
	n := startNode(t, "127.0.0.1:0", time.Millisecond, "--llm-mock-script", viewsScript(t), "--tools-approval", "list_files=always")
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#new-text"))
	do("an answer in Markdown", chromedp.SendKeys("#new-text", "markdown please"), chromedp.Submit("#new-text"))
	wait("it completes", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed" && !!document.querySelector("#turn-1 .md")`)
	wait("rendered as Markdown", `(() => {
		const md = document.querySelector("#turn-1 .step.llm .md");
		return md.querySelector("h2")?.textContent === "Findings" && md.querySelector("strong")?.textContent === "Bold" &&
			md.querySelectorAll("li").length === 2 && md.querySelector("table td")?.textContent === "list_files"
	})()`)
	wait("without its HTML", `window.pwned === undefined && !document.querySelector(".md script, .md img, .md [onerror], .md a[href^=javascript]")`)
	wait("the step's model, provider, tokens and bar", `(() => {
		const s = document.querySelector("#turn-1 .step.llm summary");
		const bar = s.querySelector("svg.wf rect.span");
		return s.querySelector(".model").textContent.includes("mock-large · mock") && s.textContent.includes("12,345 in / 6,789 out") &&
			bar && Number(bar.getAttribute("width")) > 0 && /^\+/.test(s.querySelector(".when time").textContent)
	})()`)
	wait("cancel and resume disabled, compact enabled", `document.querySelector("#cancel").disabled && document.querySelector("#resume").disabled && !document.querySelector("#compact").disabled`)

	do("a failure", chromedp.SendKeys("#text", "fail please"), chromedp.Submit("#text"))
	wait("the turn fails", `document.querySelector("#turn-2 h2 .badge")?.textContent === "failed"`)
	wait("its model step says why, and waits for nothing", `(() => {
		const st = document.querySelector("#turn-2 .step.llm.failed");
		return st && st.textContent.includes("refused for the test") && !st.querySelector(".live") && !st.innerText.includes("waiting for the model")
	})()`)

	do("a call that needs approval", chromedp.SendKeys("#text", "list please"), chromedp.Submit("#text"))
	wait("its card, the arguments pretty-printed to edit", `document.querySelector(".approval textarea")?.value === '{\n  "path": "."\n}'`)
	page, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	page = strings.SplitN(page, "?", 2)[0]
	do("the list", chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#rows"))
	wait("marks the session waiting for a person", `[...document.querySelectorAll("#rows tr")].some(r => r.textContent.includes("markdown please") && r.querySelector(".badge.approval")?.textContent === "awaits approval")`)
	do("back", chromedp.Navigate(page), chromedp.WaitVisible(".approval textarea"))
	do("edit and approve", chromedp.SetValue(".approval textarea", `{"path": "./"}`), chromedp.Click(".approval button[id^=approve]"))
	wait("the turn completes", `document.querySelector("#turn-3 h2 .badge")?.textContent === "completed"`)
	wait("who decided and when, and the call ran with the edit", `(() => {
		const notes = [...document.querySelectorAll("#turn-3 .note")].map(n => n.textContent);
		return notes.some(n => n.includes("list_files waits for a person's approval")) &&
			notes.some(n => /\d\d:\d\d:\d\d\.\d{3} list_files approved by ui, with arguments edited/.test(n)) &&
			document.querySelector("#turn-3 .step.tool pre.code")?.textContent.includes('"./"')
	})()`)

	do("compact", chromedp.Click("#compact"))
	wait("the compaction shows its summary", `[...document.querySelectorAll(".step.compaction")].some(s => s.textContent.includes("The summary it wrote") && s.textContent.includes("the user asked for Markdown"))`)

	do("a long answer", chromedp.SendKeys("#text", "slow please"), chromedp.Submit("#text"))
	wait("it streams", `(document.querySelector("#turn-4 pre.live")?.textContent || "").length > 0`)
	do("the page opened again mid-answer", chromedp.Reload())
	wait("it says the beginning is missing, and streams on", `(() => {
		const st = document.querySelector("#turn-4 .step.llm");
		const live = st?.querySelector("pre.live")?.textContent || "";
		return st.querySelector(".missed")?.textContent.includes("the first part was streamed before this page opened") && live.length > 0 && !live.includes("Beginning")
	})()`)
	wait("cancel and resume enabled while it runs, compact disabled", `!document.querySelector("#cancel").disabled && !document.querySelector("#resume").disabled && document.querySelector("#compact").disabled`)
	shot("views.png")
	do("cancel", chromedp.Click("#cancel"))
	wait("it is cancelled", `document.querySelector("#turn-4 h2 .badge")?.textContent === "cancelled" && !document.querySelector("#turn-4 .missed")`)

	// A click in the page's own script, once the link is there: the live
	// header it is in is replaced as the session changes (the cancel above),
	// and may be missing for a moment, between a lookup and a click of the
	// browser's.
	wait("the header's event count, clicked", `(() => {
		const a = document.querySelector("#events-link");
		if (!a) return false;
		a.click();
		return true
	})()`)
	do("the event log", chromedp.WaitVisible("#events"))
	wait("every event", `document.querySelectorAll("#events tr[data-type]").length > 20 && !!document.querySelector('#events tr[data-type="tool.approved"]')`)
	do("filtered by type", chromedp.SetValue("#type", "llm.completed"), chromedp.Submit("#type"))
	wait("only that type", `(() => {
		const rows = [...document.querySelectorAll("#events tr[data-type]")];
		return location.search.includes("type=llm.completed") && rows.length >= 3 && rows.every(r => r.dataset.type === "llm.completed")
	})()`)
	shot("events.png")

	do("a search of an answer's words", chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#q"), chromedp.SendKeys("#q", "listing is in"), chromedp.Submit("#q"))
	wait("finds the session and says where", `[...document.querySelectorAll("#rows .snippet")].some(s => s.textContent.includes("The listing is in."))`)
	shot("search.png")
}
