package projection

import (
	"fmt"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// A step's request sends a history that fits its budget as it is, without
// copying it (each step of a long turn copied its whole history), and no
// later fold changes what an earlier request sent: an insert (a summary, a
// result given late) makes a new array instead of moving messages in place.
func TestRequestSendsTheHistoryWithoutCopying(t *testing.T) {
	for _, budget := range []int{0, 1_000_000} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			b := newLog(t, "s1", event.Config{SystemPrompt: "sys", ContextChars: budget})
			b.turn(1, "go")
			for i := range 30 {
				c := call(fmt.Sprintf("c%d", i), "read", `{"path":"a"}`)
				b.llm("", c).tool(c, "out")
			}
			next, err := NextRequest(&b.st, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			sent, msgs := next.Request.Messages, b.st.Messages
			if len(sent) != len(msgs) || &sent[0] != &msgs[0] || cap(sent) != len(sent) {
				t.Fatalf("request of %d messages (cap %d) is a copy of the history's %d", len(sent), cap(sent), len(msgs))
			}
			was := jsonOf(t, next.Request)

			// Later folds: an append, a result of parallel calls given
			// after a later message (inserted), a summary in the middle.
			a, c := call("p1", "read", `{}`), call("p2", "read", `{}`)
			b.llm("", a, c)
			b.add(event.ToolStarted, event.ToolStartedData{StepID: b.nextStep(), Call: a})
			b.add(event.ToolStarted, event.ToolStartedData{StepID: b.nextStep(), Call: c})
			b.add(event.ToolFinished, event.ToolFinishedData{StepID: fmt.Sprintf("st%d", b.step), CallID: c.ID, Name: c.Name, Output: "second"})
			b.add(event.ToolFinished, event.ToolFinishedData{StepID: fmt.Sprintf("st%d", b.step-1), CallID: a.ID, Name: a.Name, Output: "first"})
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- half"), At: 20, Turns: 1})
			if got := jsonOf(t, next.Request); got != was {
				t.Fatalf("the request sent changed after later folds:\n%s\nwas\n%s", got, was)
			}
			if n := checkRebuilds(t, b.events, b.sent); n != 31 {
				t.Fatalf("%d steps rebuilt", n)
			}
		})
	}
}

// messageChars counts only what was appended since it last counted, and is
// llm.TotalChars of the history after every kind of change.
func TestMessageCharsFollowsTheHistory(t *testing.T) {
	b := newLog(t, "s1", event.Config{SystemPrompt: "sys"})
	check := func(what string) {
		t.Helper()
		if got, want := b.st.messageChars(), llm.TotalChars(b.st.Messages); got != want {
			t.Fatalf("%s: messageChars %d, TotalChars %d", what, got, want)
		}
		if got, want := b.st.HistoryChars(), llm.TotalChars(ApplySummary(b.st.Messages))+b.st.Elided.Chars; b.st.Elided.Messages == 0 && got != want {
			t.Fatalf("%s: HistoryChars %d, want %d", what, got, want)
		}
	}
	check("created")
	for turn := 1; turn <= 6; turn++ {
		b.turn(turn, fmt.Sprintf("turn %d, ünïcode", turn))
		check("turn started")
		for i := range 3 {
			c := call(fmt.Sprintf("c%d_%d", turn, i), "read", `{"path":"ä"}`)
			b.llm("thinking", c)
			check("llm completed")
			b.tool(c, fmt.Sprintf("output %d of turn %d", i, turn))
			check("tool finished")
		}
		b.llm("done")
		b.finish(turn, "done")
		check("turn finished")
	}
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "a longer system prompt"}})
	check("new system prompt")
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- turns 1 to 2"), At: 10, Turns: 2})
	check("summary inserted")
	elided, err := b.st.Elide(b.st.ElisionCut(0))
	if err != nil || len(elided) == 0 {
		t.Fatalf("elide: %d messages, %v", len(elided), err)
	}
	if got, want := b.st.messageChars(), llm.TotalChars(b.st.Messages); got != want {
		t.Fatalf("elided: messageChars %d, TotalChars %d", got, want)
	}
	if err := b.st.Restore(elided); err != nil {
		t.Fatal(err)
	}
	check("restored")
	b.turn(7, "more")
	check("after the restore")
}

// The tools' digest is taken again only when the tools change, and a
// change made in place to the caller's schemas is seen: the state keeps
// its own copy of what it hashed.
func TestToolsDigestFollowsTheTools(t *testing.T) {
	b := newLog(t, "s1", event.Config{})
	b.turn(1, "go")
	tools := []llm.ToolSchema{{Name: "read", Description: "reads", InputSchema: []byte(`{"type":"object"}`)}}
	check := func(what string) {
		t.Helper()
		next, err := NextRequest(&b.st, tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := event.ToolsDigest(tools)
		if err != nil {
			t.Fatal(err)
		}
		if next.Ref.ToolsDigest != want {
			t.Fatalf("%s: digest %s, want %s", what, next.Ref.ToolsDigest, want)
		}
	}
	check("first")
	check("same tools")
	tools[0].InputSchema[2] = 'T' // {"Type":"object"}, in place
	check("schema changed in place")
	tools[0].Description = "reads a file"
	check("description changed")
	tools = append(tools, llm.ToolSchema{Name: "write"})
	check("a tool added")
	tools = nil
	check("no tools")
}
