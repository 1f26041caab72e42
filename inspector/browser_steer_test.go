package inspector_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/inspector"
	"github.com/tah-dev/tah/llm"
	tahnode "github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// heldModel is a model the test drives: the prompts in hold are held until
// their channel is closed or their call cancelled (called tells each as it
// comes); "a long task" then asks for a tool the node does not have, so that
// its turn makes a second call after the tool's result. A call whose last
// message is a steer answers it ("Steered: ..."), one after a tool result
// without a steer says so, any other prompt is answered "Answer to ...".
type heldModel struct {
	called chan string
	hold   map[string]chan struct{}
}

func (m *heldModel) Name() string { return "held" }

func (m *heldModel) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Steer:
		return llm.Response{Content: "Steered: " + last.Content, FinishReason: llm.FinishStop}, nil
	case last.Role == llm.RoleTool:
		return llm.Response{Content: "no steer", FinishReason: llm.FinishStop}, nil
	}
	if release, ok := m.hold[last.Content]; ok {
		m.called <- last.Content
		select {
		case <-release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	if last.Content == "a long task" {
		return llm.Response{FinishReason: llm.FinishToolCalls,
			ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "no_such_tool", Arguments: json.RawMessage(`{}`)}}}, nil
	}
	return llm.Response{Content: "Answer to " + last.Content, FinishReason: llm.FinishStop}, nil
}

// wait returns once the model holds prompt.
func (m *heldModel) wait(t *testing.T, prompt string) {
	t.Helper()
	select {
	case got := <-m.called:
		if got != prompt {
			t.Fatalf("the model was asked %q, want %q", got, prompt)
		}
	case <-time.After(time.Minute): // catches a hang only
		t.Fatalf("the model was never asked %q", prompt)
	}
}

// steerNode runs one node in this process with model m (and the node
// options edits change), and the inspector in front of it on a loopback
// test server (no login), connected as the node's own UI is: with a
// credential of the client role of its own.
func steerNode(t *testing.T, m llm.Provider, edits ...func(*tahnode.Options)) (*tahtest.Cluster, string) {
	t.Helper()
	c := tahtest.Start(t, tahtest.Options{Nodes: 1, EditNode: func(_ int, o *tahnode.Options) {
		o.Provider = m
		for _, edit := range edits {
			edit(o)
		}
	}})
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "ui.creds")
	if err := trust.EnsureCreds(creds, wire.RoleClient, "ui"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Connect(ctx, client.Options{URL: c.Node(0).Bus().ClientURL(), CredsFile: creds, Name: "inspector test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	h, err := inspector.New(inspector.Options{Client: cl})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections() // a page's live stream ends with it
		srv.Close()
	})
	return c, srv.URL
}

// barrier returns once the node took every input of sid published before
// it: a cancel that names no input there is answered at once, after them
// (one session's inputs are taken in order).
func barrier(t *testing.T, c *tahtest.Cluster, sid string) {
	t.Helper()
	nc := c.Bus().Conn()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if _, err := c.Bus().PublishInput(context.Background(), sid, wire.Input{Command: wire.CommandCancel, InputID: "in_barrier", ReplyTo: inbox}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(time.Minute); err != nil {
		t.Fatalf("the barrier's cancel got no outcome: %v", err)
	}
}

// countTypes counts the events of sid's log by type.
func countTypes(t *testing.T, c *tahtest.Cluster, sid string) map[event.Type]int {
	t.Helper()
	evs, err := c.Log(sid)
	if err != nil {
		t.Fatal(err)
	}
	n := map[event.Type]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	return n
}

// A send whose when_busy is not one of the page's buttons (steer,
// interrupt, or none) is refused with a flash and sends nothing: the log is
// as it was once every input sent before a barrier was taken. On an idle
// session the steer and interrupt buttons are disabled, and say why.
func TestSendRefusesAnUnknownWhenBusy(t *testing.T) {
	c, base := steerNode(t, &heldModel{called: make(chan string, 1)})
	b := newBrowser(t, base)
	_, loc := b.post("/", "/new", url.Values{"text": {"hello"}})
	sid, err := sessionOf(loc)
	if err != nil {
		t.Fatalf("%v: %q", err, loc)
	}
	page := "/s/" + sid
	body := b.waitFor(page, `Turn 1 <span class="badge completed">`, time.Minute)
	for _, id := range []string{"steer", "interrupt"} {
		i := strings.Index(body, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no %s button on the page:\n%s", id, body)
		}
		button := body[i : i+strings.Index(body[i:], ">")]
		if !strings.Contains(button, " disabled") || !strings.Contains(button, "only while a turn runs") {
			t.Errorf("the %s button of an idle session: %s", id, button)
		}
	}
	before := countTypes(t, c, sid)

	for _, when := range []string{"bogus", "queue", "STEER"} {
		_, loc = b.post(page, page+"/send", url.Values{"text": {"and then?"}, "when_busy": {when}})
		f, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if msg := f.Query().Get("err"); f.Path != page || !strings.Contains(msg, `when_busy "`+when+`"`) || !strings.Contains(msg, "nothing was sent") || f.Query().Get("ok") != "" {
			t.Errorf("when_busy %q: redirected to %q", when, loc)
		}
	}
	barrier(t, c, sid)
	if after := countTypes(t, c, sid); after[event.TurnStarted] != 1 || after[event.TurnSteered] != 0 || len(after) != len(before) {
		t.Errorf("the refused sends changed the log: %v, then %v", before, after)
	}
}

// Steering in a real browser: while turn 1's first model call is held, its
// page offers "Steer this turn"; a message typed there and sent that way
// joins turn 1 (the node takes the steer before the model is released: a
// barrier), and is shown inside turn 1, between the tool step it followed
// and the model call that answered it, never as a turn of its own, live
// and after a reload; the log holds one turn.started and one turn.steered.
// Then "Interrupt and send" on a held turn 2 cancels it, "interrupted by
// input ...", and runs turn 3 with its message. Screenshot: steer.png.
func TestBrowserSteer(t *testing.T) {
	bin := chromiumPath(t)
	release := make(chan struct{})
	model := &heldModel{called: make(chan string, 4), hold: map[string]chan struct{}{
		"a long task": release, "another long task": make(chan struct{})}}
	c, base := steerNode(t, model)
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the list", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/"), chromedp.WaitVisible("#new-text"))
	do("a long task", chromedp.SendKeys("#new-text", "a long task"), chromedp.Submit("#new-text"))
	model.wait(t, "a long task")
	wait("turn 1 runs, and can be steered", `document.querySelector("#turn-1 h2 .badge")?.textContent === "running" &&
		!document.querySelector("#steer").disabled && !document.querySelector("#interrupt").disabled`)
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	sid, err := sessionOf(strings.TrimPrefix(loc, base))
	if err != nil {
		t.Fatalf("%v: %q", err, loc)
	}

	do("a steer", chromedp.SendKeys("#text", "also check the tests"), chromedp.Click("#steer"))
	wait("it is sent", `document.querySelector(".flash.ok")?.textContent.includes("steer sent")`)
	barrier(t, c, sid)
	close(release)

	steered := `(() => {
		const kinds = [...document.querySelectorAll("#turn-1 .steps > li")].map(li =>
			li.classList.contains("steered") ? "steer" : li.classList.contains("llm") ? "llm" : li.classList.contains("tool") ? "tool" : "other");
		const s = document.querySelector("#turn-1 .steered");
		return document.querySelector("#turn-1 h2 .badge")?.textContent === "completed" &&
			kinds.join() === "llm,tool,steer,llm" &&
			s.querySelector(".input").textContent === "Steered: also check the tests" && s.dataset.input?.startsWith("in_") &&
			document.querySelector("#turn-1 .step.llm:last-child .md")?.textContent.includes("Steered: also check the tests") &&
			document.querySelectorAll("#timeline > li.block").length === 1 && !document.querySelector("#turn-2") &&
			document.querySelector("#turn-1 > .input").textContent === "User: a long task from ui" && // the inspector's credential sent it
			document.querySelector("#steer")?.disabled === true && document.querySelector("#interrupt")?.disabled === true
	})()`
	wait("the steer shows inside turn 1, which completes with its answer", steered)
	shot("steer.png")
	do("the page read again", chromedp.Reload())
	wait("the same, from the log", steered)
	if n := countTypes(t, c, sid); n[event.TurnStarted] != 1 || n[event.TurnSteered] != 1 {
		t.Fatalf("the log holds %d turn.started and %d turn.steered, want 1 and 1", n[event.TurnStarted], n[event.TurnSteered])
	}

	do("another long task", chromedp.SendKeys("#text", "another long task"), chromedp.Submit("#text"))
	model.wait(t, "another long task")
	wait("turn 2 runs", `document.querySelector("#turn-2 h2 .badge")?.textContent === "running" && document.querySelector("#interrupt")?.disabled === false`)
	do("an interrupt", chromedp.SendKeys("#text", "do this instead"), chromedp.Click("#interrupt"))
	wait("turn 2 is cancelled by it, and turn 3 answers it", `(() => {
		const out = document.querySelector("#turn-2 > .outcome")?.textContent || "";
		return document.querySelector("#turn-2 h2 .badge")?.textContent === "cancelled" && /interrupted by input in_\S+/.test(out) &&
			document.querySelector("#turn-3 h2 .badge")?.textContent === "completed" &&
			document.querySelector("#turn-3 > .input").textContent === "User: do this instead from ui" &&
			document.querySelector("#turn-3 .md")?.textContent.includes("Answer to do this instead")
	})()`)
	if n := countTypes(t, c, sid); n[event.TurnStarted] != 3 || n[event.TurnSteered] != 1 || n[event.AgentCancelled] != 1 {
		t.Fatalf("the log: %v", n)
	}
}
