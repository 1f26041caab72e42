package inspector_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/llm"
	tahnode "github.com/tah-dev/tah/node"
)

// team is a parent's model and its researchers': a researcher (its system
// prompt says so) tells started its task and answers "found: <task>" once
// release is closed; the parent first asks two researchers at once, then
// answers with what they found.
type team struct {
	started chan string
	release chan struct{}
}

// callUsage is every call's: the parent's two calls and a call of each
// researcher make the tree's 440 tokens, the parent's own 220.
var callUsage = llm.Usage{InputTokens: 100, OutputTokens: 10}

func (m *team) Name() string { return "team" }

func (m *team) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if req.Messages[0].Content == "You research." {
		m.started <- last.Content
		select {
		case <-m.release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{Content: "found: " + last.Content, FinishReason: llm.FinishStop, Usage: callUsage}, nil
	}
	if last.Role == llm.RoleTool {
		var found []string
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				found = append(found, msg.Content)
			}
		}
		slices.Sort(found)
		return llm.Response{Content: "summary: " + strings.Join(found, "; "), FinishReason: llm.FinishStop, Usage: callUsage}, nil
	}
	return llm.Response{FinishReason: llm.FinishToolCalls, Usage: callUsage, ToolCalls: []llm.ToolCall{
		{ID: "call_a", Name: "agent_researcher", Arguments: json.RawMessage(`{"task": "the weather"}`)},
		{ID: "call_b", Name: "agent_researcher", Arguments: json.RawMessage(`{"task": "the tides"}`)},
	}}, nil
}

// Sub-agents in a real browser: a parent's turn calls two researchers,
// each a child session. While they work, each call's step says it waits for
// its sub-agent and links to its session, live; once they answered and the
// parent's turn completed, the parent's page lists both children in its
// Sub-agents tree, completed, with the tree's totals; a child's link opens
// its page, which links back to the parent's step of its call; that step's
// link opens the child again; the list marks both children as sub-agents of
// the parent. Screenshot: subagents.png.
func TestBrowserSubAgents(t *testing.T) {
	bin := chromiumPath(t)
	m := &team{started: make(chan string, 2), release: make(chan struct{})}
	_, base := steerNode(t, m, func(o *tahnode.Options) {
		o.Session.SubAgents = []session.SubAgent{{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}}
	})
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/"), chromedp.WaitVisible("#new-text"))
	do("a parent's turn", chromedp.SendKeys("#new-text", "what about the sea?"), chromedp.Submit("#new-text"))
	for range 2 {
		select {
		case <-m.started:
		case <-time.After(time.Minute): // catches a hang only
			t.Fatal("the researchers never began")
		}
	}
	wait("the parent's page", `location.pathname.startsWith("/s/s_")`)
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	sid, err := sessionOf(strings.TrimPrefix(loc, base))
	if err != nil {
		t.Fatalf("%v: %q", err, loc)
	}
	kidA, kidB := session.ChildID(sid, "call_a"), session.ChildID(sid, "call_b")
	calls := `[...document.querySelectorAll("#turn-1 .step.tool")]`
	wait("each call waits for its sub-agent, linked", `(() => {
		const steps = `+calls+`;
		return steps.length === 2 && steps.every(s => s.querySelector(".waiting")?.textContent.startsWith("waiting for the sub-agent")) &&
			steps.map(s => s.querySelector("summary a.child")?.getAttribute("href")).join() === "/s/`+kidA+`,/s/`+kidB+`"
	})()`)
	close(m.release)

	wait("the turn completes, its calls answered", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed" &&
		document.querySelector("#turn-1 .step.llm:last-child .md")?.textContent.includes("summary: found: the tides; found: the weather") &&
		!document.querySelector("#turn-1 .waiting") && `+calls+`.length === 2`)
	// The read model folds each child's end apart from the parent's log:
	// the page is read until its tree says both ended.
	web := newBrowser(t, base)
	web.waitFor("/s/"+sid, `data-child="`+kidB+`"><strong class="agent">researcher</strong> <span class="badge completed">`, time.Minute)
	web.waitFor("/s/"+sid, `data-child="`+kidA+`"><strong class="agent">researcher</strong> <span class="badge completed">`, time.Minute)
	do("the parent's page again", chromedp.Reload())
	wait("the tree lists both children, completed, with the tree's totals", `(() => {
		const kids = [...document.querySelectorAll("#subagents .tree > li.child")];
		return kids.map(k => k.dataset.child + " " + k.querySelector(".agent").textContent + " " + k.querySelector(".badge").textContent + " " +
				k.querySelector("a.session").getAttribute("href")).join() ===
				"`+kidA+` researcher completed /s/`+kidA+`,`+kidB+` researcher completed /s/`+kidB+`" &&
			document.querySelector("#tree-totals dd")?.textContent.startsWith("3 sessions, 440 tokens, ") &&
			document.querySelector("#head .facts")?.textContent.includes("200 in / 20 out")
	})()`)
	shot("subagents.png")

	do("a child's page, from the tree", chromedp.Click(`#subagents li[data-child="`+kidA+`"] > a.session`))
	wait("it says whose call it works on", `location.pathname === "/s/`+kidA+`" &&
		document.querySelector("#parent .agent")?.textContent === "researcher" &&
		document.querySelector("#parent-link")?.getAttribute("href") === "/s/`+sid+`" &&
		document.querySelector("#parent-call")?.getAttribute("href") === "/s/`+sid+`#call-call_a" &&
		document.querySelector("#turn-1 .step.llm .md")?.textContent.includes("found: the weather")`)
	shot("subagent-child.png")
	do("the parent's step of that call", chromedp.Click("#parent-call"))
	wait("the parent's page, at the call's step", `location.pathname === "/s/`+sid+`" && location.hash === "#call-call_a" &&
		document.querySelector(":target")?.closest(".step.tool")?.querySelector("a.child")?.getAttribute("href") === "/s/`+kidA+`"`)
	do("the step's link", chromedp.Click(`:target a.child`))
	wait("the child's page again", `location.pathname === "/s/`+kidA+`" && !!document.querySelector("#parent-link")`)

	do("the list", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#rows"))
	wait("both children marked as the parent's sub-agents", `(() => {
		const row = id => document.querySelector('#rows td:first-child > a[href="/s/' + id + '"]')?.closest("tr");
		const marked = id => row(id)?.classList.contains("child") && row(id).querySelector(".subagent a.parent")?.getAttribute("href") === "/s/`+sid+`" &&
			row(id).querySelector(".subagent").textContent.includes("researcher of");
		return marked("`+kidA+`") && marked("`+kidB+`") && row("`+sid+`") && !row("`+sid+`").classList.contains("child")
	})()`)
}
