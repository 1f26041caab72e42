package inspector_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium (the Makefile installs it with apt
// before make test). Without it the test skips, except under make test
// (TAH_BROWSER=required), where a missing browser is a failure.
func chromiumPath(t *testing.T) string {
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("TAH_BROWSER") == "required" {
		t.Fatal("chromium is not installed: make test installs it (make browser: apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed: the browser tests are skipped (make browser, or apt-get install -y chromium)")
	return ""
}

// The UI in a real browser against a real node that wants a login: a wrong
// token refused, the specification's example sent, its answer streamed in
// and its steps appearing, a tool step expanded, a long turn cancelled, a
// fork at turn 1; the list and the session page (light and dark) saved as
// screenshots in the test's artifact directory (go test -artifacts
// -outputdir DIR keeps them under DIR/_artifacts; docs/inspector.png is one).
func TestBrowser(t *testing.T) {
	bin := chromiumPath(t)
	n := startNode(t, "0.0.0.0:0", 60*time.Millisecond)
	token, err := os.ReadFile(filepath.Join(n.dir, "ui.token"))
	if err != nil {
		t.Fatal(err)
	}
	bigReadme(t, n.root) // its read is an artifact, to download
	b := openChromium(t, bin)
	do, wait, shot := b.do, b.wait, b.shot

	do("the login", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(n.base+"/"),
		chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", "wrong"), chromedp.Submit("#token"))
	wait("a wrong token refused", `document.body.innerText.includes("Wrong token")`)
	do("the right token", chromedp.SendKeys("#token", strings.TrimSpace(string(token))), chromedp.Submit("#token"), chromedp.WaitVisible("#new-text"))

	do("keyboard", chromedp.KeyEvent("\t"))
	wait("the skip link takes the first Tab", `document.activeElement.classList.contains("skip")`)

	do("the example", chromedp.SendKeys("#new-text", example), chromedp.Submit("#new-text"))
	wait("the answer streams in", `(() => { const p = document.querySelector("pre.live"); return p && p.textContent.length > 0 })()`)
	wait("the turn completes with its steps", `document.querySelector("#turn-1 h2 .badge")?.textContent === "completed" && document.querySelectorAll("#turn-1 .step").length >= 5`)
	wait("the final answer", `document.querySelector("#turn-1 .step.llm:last-child .md")?.textContent.includes("README")`)
	sid, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil || !strings.Contains(sid, "/s/s_") {
		t.Fatalf("the session's page: %q %v", sid, err)
	}
	sid = strings.SplitN(strings.TrimPrefix(sid, n.base+"/s/"), "?", 2)[0]

	do("a tool step expanded", chromedp.Click("#turn-1 .step.tool summary"))
	wait("its output shown", `(() => { const d = document.querySelector("#turn-1 .step.tool details"); return d.open && d.querySelector("pre.code").offsetHeight > 0 })()`)
	shot("session.png")

	wait("the artifact downloads as a file", `(() => {
		const a = document.querySelector("#turn-1 .artifact a[download]");
		if (a && !window.download) {
			window.download = "pending";
			fetch(a.href).then(async r => { window.download = r.status + " " + r.headers.get("content-disposition") + " " + (await r.text()).length });
		}
		return window.download === "200 attachment; filename=output.txt `+fmt.Sprint(bigReadmeSize)+`";
	})()`)

	do("dark mode", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	wait("a dark background", `getComputedStyle(document.body).backgroundColor === "rgb(15, 18, 22)"`)
	shot("session-dark.png")
	do("light again", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
		return err
	}))

	do("a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(n.base+"/"), chromedp.WaitVisible("#rows"))
	wait("no sideways scrolling", `document.documentElement.scrollWidth <= window.innerWidth`)
	do("a laptop", chromedp.EmulateViewport(1280, 900), chromedp.Reload(), chromedp.WaitVisible("#rows"))
	wait("the session listed", `document.querySelector("#rows").innerText.includes("`+example+`")`)
	shot("list.png")

	do("a long turn", chromedp.Navigate(n.base+"/s/"+sid), chromedp.WaitVisible("#text"),
		chromedp.SendKeys("#text", "再分析一次"), chromedp.Submit("#text"))
	wait("it runs, and can be cancelled", `document.querySelector("#turn-2 h2 .badge")?.textContent === "running" && !document.querySelector("#cancel").disabled`)
	do("cancel", chromedp.Click("#cancel"))
	wait("it is cancelled", `document.querySelector("#turn-2 h2 .badge")?.textContent === "cancelled" && document.querySelector(".flash.ok")?.textContent.includes("cancelled: turn 2 stopped")`)

	do("fork at turn 1", chromedp.SetValue("#fork-turns", "1"), chromedp.Click("#fork"))
	wait("the fork's page", `location.pathname !== "/s/`+sid+`" && document.querySelector(".flash.ok")?.textContent.includes("forked from `+sid+`")`)
	wait("with turn 1's history only", `document.querySelector("#timeline .note")?.textContent.includes("its first 1 turn(s)")`)
}

// navigated reports whether err says the page changed under the poll.
func navigated(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context") || strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "Execution context was destroyed")
}

// chromium is one headless browser tab of a test, closed at its end.
type chromium struct {
	t   *testing.T
	ctx context.Context
}

func openChromium(t *testing.T, bin string) *chromium {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // catches a hang only
	t.Cleanup(cancel)
	actx, stopAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))...)
	t.Cleanup(stopAlloc)
	bctx, stopBrowser := chromedp.NewContext(actx)
	t.Cleanup(stopBrowser)
	return &chromium{t: t, ctx: bctx}
}

// do runs steps, failing the test with what when one fails.
func (b *chromium) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls a predicate, again when a navigation (a form's redirect)
// destroyed the page it polled in; a failure shows the page's text.
func (b *chromium) wait(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := chromedp.Do(b.ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if !navigated(err) || time.Now().After(deadline) {
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			b.t.Fatalf("%s: %v\nthe page:\n%s", what, err, page)
		}
	}
}

// shot saves the page as name in the test's artifact directory.
func (b *chromium) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.t.ArtifactDir(), name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
