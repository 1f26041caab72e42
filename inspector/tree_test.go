package inspector

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// A parent's page, rendered from a state made by hand: a running sub-agent
// call says it waits and links to its child, the ended one only links; the
// tree lists the children (one the read model does not list yet, named from
// its call, status unknown) and a grandchild nested under its parent, with
// the tree's totals beside the session's own. A child's page says whose
// call it works on, with a link to that call's step; the list marks it.
func TestSubAgentsRender(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	render := func(name string, data any) string {
		t.Helper()
		var b strings.Builder
		if err := pages.ExecuteTemplate(&b, name, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b.String()
	}
	steps := []projection.Step{
		{ID: "st_a", Type: projection.StepTool, Turn: 1, Status: projection.StepCompleted, Tool: "agent_researcher", CallID: "call_a", Child: "s_kid_a", Output: "found"},
		{ID: "st_b", Type: projection.StepTool, Turn: 1, Status: projection.StepRunning, Tool: "agent_writer", CallID: "call_b", Child: "s_kid_b"},
	}
	tl := &timeline{state: projection.State{ID: "s_parent", Status: projection.StatusWaitingTool, Turn: 1, Steps: steps},
		blocks: []*block{{Key: "turn-1", Turn: 1, Input: "go", Status: projection.StatusRunning, Items: []item{{StepID: "st_a"}, {StepID: "st_b"}}}}}
	read := []wire.ChildSummary{{ID: "s_kid_a", Agent: "researcher", CallID: "call_a", Status: projection.StatusCompleted}}
	kids := mergeChildren("s_parent", childSteps(&tl.state), read)
	kids[0].Children = []childView{{ChildSummary: wire.ChildSummary{ID: "s_grandkid", Agent: "checker", CallID: "call_c", Status: projection.StatusFailed}, Parent: "s_kid_a"}}
	tl.tree = &treeView{Totals: &wire.TreeTotals{Sessions: 5, Usage: llm.Usage{InputTokens: 1200, OutputTokens: 300}, Cost: pricing.Cost{USD: 0.3}},
		Children: kids, Unread: 5 - 1 - count(kids)}
	parent := render("session.html", page{Title: "x", Data: tl.sessionView("s_parent")})

	a, b := stepHTML(t, parent, "st_a"), stepHTML(t, parent, "st_b")
	for _, want := range []string{`id="call-call_a"`, `<a class="child" href="/s/s_kid_a"`, `→ session <code>s_kid_a</code>`} {
		if !strings.Contains(a, want) {
			t.Errorf("the ended call's step lacks %q:\n%s", want, a)
		}
	}
	if strings.Contains(a, "waiting for the sub-agent") || !strings.Contains(b, "waiting for the sub-agent") || !strings.Contains(b, `href="/s/s_kid_b"`) {
		t.Errorf("only the running call waits for its sub-agent:\n%s\n%s", a, b)
	}
	if !strings.Contains(parent, `<dt>With sub-agents</dt><dd title="this session and all its sub-agents' sessions, at every depth, as the read model counts them">5 sessions, 1,500 tokens, $0.30</dd>`) {
		t.Errorf("the tree's totals are not in the header:\n%s", parent)
	}
	i := strings.Index(parent, `id="subagents"`)
	if i < 0 {
		t.Fatalf("no sub-agents section:\n%s", parent)
	}
	tree := parent[i : i+strings.Index(parent[i:], "</section>")]
	for _, want := range []string{
		`<li class="child" data-child="s_kid_a"><strong class="agent">researcher</strong> <span class="badge completed">completed</span> <a href="/s/s_kid_a" class="session">`,
		`<a href="/s/s_parent#call-call_a" class="call">`,
		`<ul class="tree"><li class="child" data-child="s_grandkid"><strong class="agent">checker</strong> <span class="badge failed">failed</span>`,
		`<a href="/s/s_kid_a#call-call_c" class="call">`,
		`data-child="s_kid_b"><strong class="agent">writer</strong> <span class="badge" title="the read model does not list this session yet, or could not be read">unknown</span>`,
		"1 more session of the tree not shown.",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("the tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Index(tree, `data-child="s_grandkid"`) > strings.Index(tree, `data-child="s_kid_b"`) {
		t.Errorf("the grandchild is not nested under its parent, before the next child:\n%s", tree)
	}

	child := &timeline{state: projection.State{ID: "s_kid_a", Status: projection.StatusCompleted,
		Parent: &event.ParentLink{Session: "s_parent", CallID: "call_a", Agent: "researcher", Depth: 1}}}
	page := render("session.html", page{Title: "x", Data: child.sessionView("s_kid_a")})
	if !strings.Contains(page, `Sub-agent <strong class="agent">researcher</strong> of <a href="/s/s_parent" id="parent-link">`) ||
		!strings.Contains(page, `<a href="/s/s_parent#call-call_a" id="parent-call"`) || strings.Contains(page, "depth") || strings.Contains(page, `id="subagents"`) {
		t.Errorf("the child's page:\n%s", page)
	}

	rows := render("rows", listView{Sessions: []wire.SessionSummary{{ID: "s_kid_a", Parent: child.state.Parent}, {ID: "s_parent"}}})
	if !strings.Contains(rows, `<tr class="child">`) || !strings.Contains(rows, `<span class="muted">researcher of</span> <a href="/s/s_parent" class="parent">`) ||
		strings.Count(rows, "sub-agent</span>") != 1 {
		t.Errorf("the list's rows:\n%s", rows)
	}
}
