package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestRequestRoundTripsThroughJSON(t *testing.T) {
	temp := 0.2
	c := ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}
	req := Request{
		Model:    "m",
		Messages: []Message{System("s"), User("u"), Assistant("", c), ToolResult(c, "out", true)},
		Tools:    []ToolSchema{{Name: "read_file", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Options:  Options{MaxTokens: 10, Temperature: &temp, Stop: []string{"x"}},
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back Request
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, back) {
		t.Fatalf("round trip changed the request:\n%s", b)
	}
	resp := Response{Model: "m", Content: "x", ToolCalls: []ToolCall{c}, FinishReason: FinishToolCalls, Usage: Usage{1, 2, 3}}
	b, _ = json.Marshal(resp)
	var rb Response
	if err := json.Unmarshal(b, &rb); err != nil || !reflect.DeepEqual(resp, rb) {
		t.Fatalf("response round trip: %v %s", err, b)
	}
}

func TestCloneSharesNothing(t *testing.T) {
	m := Assistant("", ToolCall{ID: "1", Arguments: json.RawMessage(`{"a":1}`)})
	c := m.Clone()
	c.ToolCalls[0].Arguments[2] = 'b'
	c.ToolCalls[0].ID = "2"
	if string(m.ToolCalls[0].Arguments) != `{"a":1}` || m.ToolCalls[0].ID != "1" {
		t.Fatal("clone shares memory with the original")
	}
}

func TestChars(t *testing.T) {
	m := Assistant("héllo", ToolCall{Name: "ab", Arguments: json.RawMessage(`{}`)})
	if got := m.Chars(); got != 5+2+2 {
		t.Fatalf("chars %d", got)
	}
	if TotalChars([]Message{User("ab"), User("cd")}) != 4 {
		t.Fatal("total")
	}
}

func TestCheckPairing(t *testing.T) {
	a, b := ToolCall{ID: "a", Name: "t"}, ToolCall{ID: "b", Name: "t"}
	cases := []struct {
		name string
		msgs []Message
		ok   bool
	}{
		{"empty", nil, true},
		{"plain", []Message{System("s"), User("u"), Assistant("x")}, true},
		{"paired", []Message{User("u"), Assistant("", a, b), ToolResult(b, "", false), ToolResult(a, "", false), Assistant("x")}, true},
		{"missing result", []Message{User("u"), Assistant("", a, b), ToolResult(a, "", false)}, false},
		{"orphan result", []Message{User("u"), ToolResult(a, "", false)}, false},
		{"result after a gap", []Message{User("u"), Assistant("", a), User("v"), ToolResult(a, "", false)}, false},
		{"duplicate result", []Message{User("u"), Assistant("", a), ToolResult(a, "", false), ToolResult(a, "", false)}, false},
		{"a call twice, answered once", []Message{User("u"), Assistant("", a, a), ToolResult(a, "", false)}, true},
		{"a call twice, answered twice", []Message{User("u"), Assistant("", a, a), ToolResult(a, "", false), ToolResult(a, "", false)}, false},
		{"many calls", manyCalls(40, 40), true},
		{"many calls, one unanswered", manyCalls(40, 39), false},
	}
	for _, tc := range cases {
		err := CheckPairing(tc.msgs)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnpaired)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// manyCalls is a turn of one assistant message of n calls and results
// for the first answered of them, in reverse order.
func manyCalls(n, answered int) []Message {
	calls := make([]ToolCall, n)
	for i := range calls {
		calls[i] = ToolCall{ID: fmt.Sprintf("c%d", i), Name: "t"}
	}
	msgs := []Message{User("u"), Assistant("", calls...)}
	for i := answered - 1; i >= 0; i-- {
		msgs = append(msgs, ToolResult(calls[i], "ok", false))
	}
	return msgs
}

// CheckPairing runs over every message of every request (the providers'
// and the mock's check), so a history that pairs costs no allocation: it
// was a map per assistant message.
func TestCheckPairingAllocatesNothing(t *testing.T) {
	var msgs []Message
	for i := range 100 {
		a, b := ToolCall{ID: fmt.Sprintf("a%d", i), Name: "t"}, ToolCall{ID: fmt.Sprintf("b%d", i), Name: "t"}
		msgs = append(msgs, User("u"), Assistant("", a, b), ToolResult(b, "ok", false), ToolResult(a, "ok", false), Assistant("x"))
		msgs = append(msgs, manyCalls(12, 12)...) // a batch of parallel calls
	}
	if n := testing.AllocsPerRun(10, func() {
		if err := CheckPairing(msgs); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations for %d messages", n, len(msgs))
	}
}

func TestUsageAndErrors(t *testing.T) {
	u := Usage{1, 2, 3}.Add(Usage{10, 20, 30})
	if u != (Usage{11, 22, 33}) || u.Total() != 33 {
		t.Fatalf("%+v", u)
	}
	err := error(&ProviderError{Provider: "openai", Status: 429, Message: "slow down", Err: ErrRateLimited})
	if !errors.Is(err, ErrRateLimited) || err.Error() != "openai: HTTP 429: slow down" {
		t.Fatal(err)
	}
}

// BenchmarkCheckPairing: the history of a turn of 4,000 tool steps, which a
// provider checks before each of its calls.
func BenchmarkCheckPairing(b *testing.B) {
	msgs := []Message{System("s"), User("u")}
	for i := range 4000 {
		c := ToolCall{ID: fmt.Sprintf("c%d", i), Name: "t", Arguments: []byte(`{}`)}
		msgs = append(msgs, Assistant("", c), ToolResult(c, "ok", false))
	}
	for b.Loop() {
		if err := CheckPairing(msgs); err != nil {
			b.Fatal(err)
		}
	}
}
