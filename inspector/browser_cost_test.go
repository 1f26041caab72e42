package inspector_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The cost of each model call, each turn and the session, as the node
// recorded them from its price table (--llm-prices), in a real browser: a
// turn of two priced calls ($0.60 each: 100,000 tokens in at $3 a million,
// 20,000 out at $15), then one of a model the table does not price, shown
// as "no price" and counted as such in the session's total. Screenshot:
// cost.png. The node limits each session to $2 (agent.budget): the header
// shows that limit with the session's spend beside its cost, and a third
// turn, of two priced calls that each ask for a tool, fails at it after its
// second: the limit is marked reached at $2.40 of $2.00. Screenshot:
// budget.png.
func TestBrowserCost(t *testing.T) {
	bin := chromiumPath(t)
	dir := t.TempDir()
	prices, script := filepath.Join(dir, "prices.json"), filepath.Join(dir, "script.json")
	for name, body := range map[string]string{
		prices: `{"defaults": false, "prices": [{"provider": "mock", "model": "priced-model", "input": 3, "output": 15}]}`,
		script: `{"replies": [
			{"prompt": "priced please", "after_tool": false, "model": "priced-model", "usage": {"input_tokens": 100000, "output_tokens": 20000},
			 "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
			{"prompt": "priced please", "after_tool": true, "model": "priced-model", "usage": {"input_tokens": 100000, "output_tokens": 20000},
			 "text": "Priced."},
			{"prompt": "unpriced please", "model": "a-model-without-a-price", "usage": {"input_tokens": 100000, "output_tokens": 20000},
			 "text": "Not priced."},
			{"prompt": "over budget please", "model": "priced-model", "usage": {"input_tokens": 100000, "output_tokens": 20000}, "times": 2,
			 "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]}
		]}`,
	} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, "127.0.0.1:0", time.Millisecond, "--llm-mock-script", script, "--llm-prices", prices,
		"--budget-session-cost-usd", "2")
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#new-text"))
	do("a priced turn", chromedp.SendKeys("#new-text", "priced please"), chromedp.Submit("#new-text"))
	wait("it completes", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed"`)
	wait("each call's cost, the turn's and the session's", `(() => {
		const calls = [...document.querySelectorAll("#turn-1 .step.llm summary .cost")].map(e => e.textContent);
		return calls.length === 2 && calls.every(c => c === "$0.60") &&
			document.querySelector("#turn-1 h2 .cost")?.textContent === "$1.20" &&
			document.querySelector("#cost")?.textContent === "$1.20" &&
			!document.querySelector("#turn-1 .step.tool summary .cost")
	})()`)
	wait("the session's cost limit beside its cost, with its spend", `(() => {
		const l = document.querySelector('#head [data-limit="session.cost_usd"]');
		return l?.querySelector("dt")?.textContent === "Session cost" && l.querySelector(".spent")?.textContent === "$1.20" &&
			l.querySelector(".of")?.textContent === "$2.00" && !l.classList.contains("reached") && !l.querySelector(".badge") &&
			l.querySelector("dd").title.includes("the node's agent.budget") &&
			document.querySelectorAll("#head [data-limit]").length === 1
	})()`)

	do("a turn of a model without a price", chromedp.SendKeys("#text", "unpriced please"), chromedp.Submit("#text"))
	wait("it completes", `document.querySelector("#turn-2 h2 .badge")?.textContent === "completed"`)
	wait("no price, never a guessed cost", `(() => {
		const step = document.querySelector("#turn-2 .step.llm summary");
		return step?.querySelector(".cost")?.textContent === "no price" && step.textContent.includes("100,000 in / 20,000 out") &&
			document.querySelector("#turn-2 h2 .cost")?.textContent === "no price" &&
			document.querySelector("#turn-1 h2 .cost")?.textContent === "$1.20" &&
			document.querySelector("#cost")?.textContent === "$1.20 + 1 call without a price"
	})()`)
	shot("cost.png")

	do("a turn over the budget", chromedp.SendKeys("#text", "over budget please"), chromedp.Submit("#text"))
	wait("it fails at the session's cost limit", `document.querySelector("#turn-3 h2 .badge")?.textContent === "failed" &&
		document.querySelector("#turn-3 .outcome code")?.textContent === "budget_exceeded"`)
	wait("the limit reached, at its spend", `(() => {
		const l = document.querySelector('#head [data-limit="session.cost_usd"]');
		return l?.classList.contains("reached") && l.querySelector(".spent")?.textContent === "$2.40" &&
			l.querySelector(".of")?.textContent === "$2.00" && l.querySelector(".badge.failed")?.textContent === "reached" &&
			document.querySelector("#cost")?.textContent === "$2.40 + 1 call without a price"
	})()`)
	shot("budget.png")
}
