package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
)

// A long value is cut around where the two part, alike on both sides, with
// the cuts marked; a short one is kept whole.
func TestExcerpts(t *testing.T) {
	if a, b := excerpts("short", "shorter"); a != "short" || b != "shorter" {
		t.Errorf("short: %q %q", a, b)
	}
	head := strings.Repeat("a", 500)
	a, b := excerpts(head+"X"+strings.Repeat("b", 500), head+"Y"+strings.Repeat("b", 500))
	for _, s := range []string{a, b} {
		if !strings.HasPrefix(s, "…"+strings.Repeat("a", excerptBefore)) || !strings.HasSuffix(s, "b…") || len([]rune(s)) != excerptRunes+2 {
			t.Errorf("long: %q", s)
		}
	}
	if !strings.Contains(a, "aX") || !strings.Contains(b, "aY") {
		t.Errorf("the cut misses where they part: %q %q", a, b)
	}
}

// Tools are told apart by name: one only in either request, a changed
// description or schema (whatever its whitespace), and a change of order.
func TestDiffTools(t *testing.T) {
	x := llm.ToolSchema{Name: "x", Description: "X.", InputSchema: json.RawMessage(`{"type": "object"}`)}
	y := llm.ToolSchema{Name: "y", Description: "Y."}
	same := x
	same.InputSchema = json.RawMessage(`{"type":"object"}`)
	if d := diffTools([]llm.ToolSchema{x, y}, []llm.ToolSchema{same, y}); len(d) != 0 {
		t.Errorf("the same tools: %+v", d)
	}
	if d := diffTools([]llm.ToolSchema{x, y}, []llm.ToolSchema{y, x}); len(d) != 1 || d[0].What != "tools" || d[0].Recorded != `["x","y"]` {
		t.Errorf("order: %+v", d)
	}
	z := y
	z.Description = "Z."
	d := diffTools([]llm.ToolSchema{x, y}, []llm.ToolSchema{z, {Name: "w"}})
	want := []string{"x removed", "y description", "w added"}
	if len(d) != len(want) {
		t.Fatalf("changes: %+v", d)
	}
	for i, w := range want {
		if got := d[i].Name + " " + d[i].Field; got != w {
			t.Errorf("change %d: %q, want %q", i, got, w)
		}
	}
}

// Messages: the first that differs, by its first part that does, and how
// many do; a request with more messages says which is extra.
func TestDiffMessages(t *testing.T) {
	a := []llm.Message{llm.System("p"), llm.User("u1"), llm.Assistant("a1"), llm.User("u2")}
	b := []llm.Message{llm.System("p"), llm.User("u1!"), llm.Assistant("a1!"), llm.User("u2")}
	d := diffMessages(a, b)
	if len(d) != 2 || *d[0].Index != 1 || d[0].Role != "user" || d[0].Field != "content" || d[1].What != "messages" || d[1].Recorded != "2 of 4" {
		t.Errorf("two differ: %+v", d)
	}
	d = diffMessages(a, append(a[:4:4], llm.User("more")))
	if len(d) != 2 || *d[0].Index != 4 || d[0].Field != "only in the replay" || d[0].Replayed != "more" || d[1].Recorded != "4" || d[1].Replayed != "5" {
		t.Errorf("one more: %+v", d)
	}
	if d := diffMessages(a, a); len(d) != 0 {
		t.Errorf("the same: %+v", d)
	}
}
