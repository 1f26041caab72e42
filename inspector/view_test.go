package inspector

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
)

// foldUntil folds a recorded log's events before sequence before, then
// extra (events as JSON lines), marking the LLM steps in flight between the
// two when mark is set (as a page read at that point does).
func foldUntil(t *testing.T, name string, before uint64, mark bool, extra ...string) *timeline {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "projection", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := &timeline{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e event.Event
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq >= before {
			break
		}
		tl.add(e)
	}
	if mark {
		tl.markInFlight()
	}
	for _, x := range extra {
		var e event.Event
		if err := json.Unmarshal([]byte(x), &e); err != nil {
			t.Fatal(err)
		}
		tl.add(e)
	}
	if tl.foldErr != nil {
		t.Fatalf("%s: %v", name, tl.foldErr)
	}
	return tl
}

// renderPage renders tl's session page.
func renderPage(t *testing.T, tl *timeline) string {
	t.Helper()
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, "session.html", page{Title: "x", Data: tl.sessionView(tl.state.ID)}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// stepHTML is the element of step id in a page.
func stepHTML(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="step-`+id+`"`)
	if i < 0 {
		t.Fatalf("step %s is not on the page", id)
	}
	end := strings.Index(page[i:], "</li>")
	return page[i : i+end]
}

// An answer is Markdown made HTML, and never carries the answer's own HTML
// through: no script, no event handler, no javascript: link.
func TestAnswersAreSafeMarkdown(t *testing.T) {
	answer := "**Bold** and `code`\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n" +
		"<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[click](javascript:alert(3)) <b onclick=alert(4)>x</b>"
	html := string(markdown(answer))
	for _, want := range []string{"<strong>Bold</strong>", "<code>code</code>", "<li>one</li>", "<table>", "<td>1</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the Markdown lacks %s:\n%s", want, html)
		}
	}
	for _, bad := range []string{"<script", "onerror", "onclick", "javascript:", "<img", "<b "} {
		if strings.Contains(html, bad) {
			t.Errorf("the Markdown carries %q through:\n%s", bad, html)
		}
	}
	// On a page: the final answer of the recorded example is rendered.
	tl := recordedWith(t, "spec_example", map[uint64]string{15: `{"step_id":"st5","response":{"content":"这是 **Go** 项目","finish_reason":"stop","usage":{"input_tokens":10,"output_tokens":5}}}`})
	if st := stepHTML(t, renderPage(t, tl), "st5"); !strings.Contains(st, `<div class="md"><p>这是 <strong>Go</strong> 项目</p>`) {
		t.Errorf("the answer is not rendered as Markdown:\n%s", st)
	}
}

// Numbers for people carry thousands separators: tokens, counts, sizes of
// texts.
func TestThousandsSeparators(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45678: "-45,678"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
	tl := recordedWith(t, "spec_example", map[uint64]string{15: `{"step_id":"st5","response":{"content":"done","finish_reason":"stop","usage":{"input_tokens":12345,"output_tokens":6789}}}`})
	if page := renderPage(t, tl); !strings.Contains(stepHTML(t, page, "st5"), "12,345 in / 6,789 out") {
		t.Errorf("the step's tokens are written without separators:\n%s", stepHTML(t, page, "st5"))
	}
}

// Each step is a bar on its turn's span, in the order the steps started,
// with its start after the turn's and its model named.
func TestWaterfall(t *testing.T) {
	tl := recorded(t, "spec_example")
	v := tl.view(tl.blocks[0])
	if v.Span != 13*time.Second { // turn.started 10:00:03, agent.finished 10:00:16
		t.Errorf("the turn's span: %s", v.Span)
	}
	last := -1
	for _, it := range v.Items {
		if it.Step == nil {
			continue
		}
		b := it.Bar
		if b.X < last || b.W < minBar || b.X+b.W > 1000 || b.Offset != it.Step.StartedAt.Sub(v.StartedAt) {
			t.Errorf("step %s: bar %+v after x=%d", it.Step.ID, b, last)
		}
		last = b.X
	}
	page := renderPage(t, tl)
	if n := strings.Count(page, `<svg class="wf"`); n != len(tl.state.Steps) {
		t.Errorf("%d waterfall bars for %d steps", n, len(tl.state.Steps))
	}
	st1 := stepHTML(t, page, "st1")
	for _, want := range []string{`<rect class="span" x="153" width="76"`, `>&#43;2s</time>`, `<span class="muted">on n1</span>`} { // 2s into 13s; 1s long
		if !strings.Contains(st1, want) {
			t.Errorf("step st1 lacks %s:\n%s", want, st1)
		}
	}
	tl.providers = map[string]string{"n1": "openai"}
	if st := stepHTML(t, renderPage(t, tl), "st1"); !strings.Contains(st, `openai <span class="muted">on n1</span>`) {
		t.Errorf("the step's provider is not shown:\n%s", st)
	}
	tl = recordedWith(t, "spec_example", map[uint64]string{6: `{"step_id":"st1","response":{"model":"gpt-x","tool_calls":[{"id":"call_1","name":"list_files","arguments":{"path":"."}}],"finish_reason":"tool_calls"}}`})
	tl.providers = map[string]string{"n1": "openai"}
	if st := stepHTML(t, renderPage(t, tl), "st1"); !strings.Contains(st, `gpt-x · openai <span class="muted">on n1</span>`) {
		t.Errorf("the step's model and provider are not shown:\n%s", st)
	}
}

// A compaction shows the summary it wrote: with its step, or with its note
// in a log whose compactions were no steps.
func TestCompactionShowsItsSummary(t *testing.T) {
	compacted := `{"sessionId":"s_budget","turns":5,"chars":60,"auto":true,"step_id":"cmp6","model":"m","usage":{"input_tokens":100,"output_tokens":20}}`
	page := renderPage(t, recordedWith(t, "budget_trim_maxsteps", map[uint64]string{47: compacted}))
	if st := stepHTML(t, page, "cmp6"); !strings.Contains(st, "big.txt was read four times") {
		t.Errorf("the compaction step does not show its summary:\n%s", st)
	}
	if page := renderPage(t, recorded(t, "cancel_repair_compact")); !regexp.MustCompile(`(?s)context compacted[^<]*<details class="summary">.*the user asked twice`).MatchString(page) {
		t.Errorf("the compaction's note does not show its summary:\n%s", page)
	}
}

// A page read while a step streams says that the answer's beginning is not
// on it; a step that starts after the read (a live update) has all its
// deltas and says nothing; a failed step is no longer "waiting for the
// model".
func TestInFlightAndFailedSteps(t *testing.T) {
	inFlight := stepHTML(t, renderPage(t, foldUntil(t, "spec_example", 15, true)), "st5")
	if !strings.Contains(inFlight, "the first part was streamed before this page opened") || !strings.Contains(inFlight, `class="text live"`) {
		t.Errorf("a step streaming when the page was read:\n%s", inFlight)
	}
	started := `{"seq":14,"session":"s_example","type":"llm.started","time":"2026-11-30T10:00:14Z","data":{"step_id":"st5","turn":1,"history":6}}`
	later := stepHTML(t, renderPage(t, foldUntil(t, "spec_example", 14, true, started)), "st5")
	if strings.Contains(later, "streamed before") || !strings.Contains(later, `class="text live"`) {
		t.Errorf("a step that started after the page was read:\n%s", later)
	}
	failed := stepHTML(t, renderPage(t, foldUntil(t, "spec_example", 15, true,
		`{"seq":15,"session":"s_example","type":"llm.failed","time":"2026-11-30T10:00:15Z","data":{"step_id":"st5","error":"the provider said no","code":"provider"}}`,
		`{"seq":16,"session":"s_example","type":"agent.failed","time":"2026-11-30T10:00:16Z","data":{"turn":1,"error":"the provider said no","code":"provider","steps":3}}`)), "st5")
	if strings.Contains(failed, "live") || strings.Contains(failed, "streamed before") || !strings.Contains(failed, "the provider said no") {
		t.Errorf("a failed step:\n%s", failed)
	}
}

// The timeline says who decided a call that waited for approval, and
// when.
func TestApprovalsInTimeline(t *testing.T) {
	requested := `{"seq":7,"session":"s_example","type":"tool.approval-requested","time":"2026-11-30T10:00:07Z","data":{"turn":1,"calls":[{"id":"call_1","name":"list_files","arguments":{"path":"."}}]}}`
	for _, c := range []struct{ decided, want string }{
		{`{"seq":8,"session":"s_example","type":"tool.approved","time":"2026-11-30T10:00:08.25Z","data":{"call_id":"call_1","by":"alice","arguments":{"path":"docs"}}}`,
			`<time class="at" datetime="2026-11-30T10:00:08Z" title="2026-11-30 10:00:08.250 UTC">10:00:08.250</time> list_files approved by alice, with arguments edited`},
		{`{"seq":8,"session":"s_example","type":"tool.denied","time":"2026-11-30T10:00:09Z","data":{"call_id":"call_1","by":"bob","note":"not now"}}`,
			`10:00:09.000</time> list_files denied by bob: not now`},
		{`{"seq":8,"session":"s_example","type":"tool.denied","time":"2026-11-30T10:00:09Z","data":{"call_id":"call_1","expired":true}}`,
			`list_files denied: nobody decided before the deadline`},
	} {
		page := renderPage(t, foldUntil(t, "spec_example", 7, false, requested, c.decided))
		if !strings.Contains(page, "list_files waits for a person&#39;s approval") || !strings.Contains(page, c.want) {
			t.Errorf("the timeline lacks %q:\n%s", c.want, page)
		}
	}
}

// The buttons of actions that cannot apply are disabled.
func TestActionsThatApply(t *testing.T) {
	done := renderPage(t, recorded(t, "spec_example"))
	running := renderPage(t, foldUntil(t, "spec_example", 15, true))
	for _, c := range []struct {
		page, id string
		enabled  bool
	}{{done, "cancel", false}, {done, "resume", false}, {done, "compact", true}, {running, "cancel", true}, {running, "resume", true}, {running, "compact", false}} {
		tag := regexp.MustCompile(`<button[^>]* id="` + c.id + `"[^>]*>`).FindString(c.page)
		if tag == "" || strings.Contains(tag, "disabled") == c.enabled {
			t.Errorf("button %s (enabled: %v): %s", c.id, c.enabled, tag)
		}
	}
}

func TestSnippetAndFilters(t *testing.T) {
	text := strings.Repeat("a", 100) + "\nThe Needle is\there " + strings.Repeat("目", 100)
	s, ok := snippet(text, "needle")
	if !ok || !strings.Contains(s, "The Needle is here") || !strings.HasPrefix(s, "…") || !strings.HasSuffix(s, "…") || strings.ContainsRune(s, '\ufffd') {
		t.Errorf("snippet: %q %v", s, ok)
	}
	if _, ok := snippet(text, "hay"); ok {
		t.Error("a snippet of what is not there")
	}
	for _, c := range []struct {
		t      event.Type
		filter string
		want   bool
	}{{event.LLMCompleted, "", true}, {event.LLMCompleted, "llm.", true}, {event.LLMCompleted, "llm.completed", true}, {event.LLMStarted, "llm.completed", false}, {event.ToolStarted, "llm.", false}} {
		if typeMatches(c.t, c.filter) != c.want {
			t.Errorf("typeMatches(%s, %q) != %v", c.t, c.filter, c.want)
		}
	}
	if ts := eventTypes(); ts[0] != "session." || !strings.Contains(strings.Join(ts, " "), " tool.approved ") {
		t.Errorf("the filter's types: %q", ts)
	}
	if !sameJSON("{\n  \"path\": \".\"\n}", `{"path":"."}`) || sameJSON(`{"path":"docs"}`, `{"path":"."}`) || sameJSON("not json", "not json") {
		t.Error("sameJSON")
	}
}
