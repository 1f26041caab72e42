package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// TestSameMessageComparesEveryField changes each field of a message (and of
// its tool call) in turn: SameMessage must tell every one apart, so that a
// field added to Message and not compared fails here.
func TestSameMessageComparesEveryField(t *testing.T) {
	base := Message{Role: RoleAssistant, Content: "c", ToolCallID: "id", Name: "n",
		ToolCalls: []ToolCall{{ID: "call", Name: "tool", Arguments: json.RawMessage(`{"a":1}`)}}}
	if !SameMessage(base, base) {
		t.Fatal("a message differs from itself")
	}
	changed := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				v.SetBytes(append(append([]byte(nil), v.Bytes()...), ' '))
			} else {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
		default:
			t.Fatalf("a field of kind %s: teach this test and SameMessage to change and compare it", v.Kind())
		}
	}
	mt := reflect.TypeOf(base)
	for i := range mt.NumField() {
		m := base
		m.ToolCalls = append([]ToolCall(nil), base.ToolCalls...)
		changed(reflect.ValueOf(&m).Elem().Field(i))
		if SameMessage(base, m) || SameMessage(m, base) {
			t.Errorf("Message.%s changed, and SameMessage did not see it", mt.Field(i).Name)
		}
	}
	ct := reflect.TypeOf(ToolCall{})
	for i := range ct.NumField() {
		m := base
		m.ToolCalls = append([]ToolCall(nil), base.ToolCalls...)
		changed(reflect.ValueOf(&m.ToolCalls[0]).Elem().Field(i))
		if SameMessage(base, m) {
			t.Errorf("ToolCall.%s changed, and SameMessage did not see it", ct.Field(i).Name)
		}
	}
}

// TestMemoEncodesWhatChanged follows a conversation: each request encodes
// only the messages after those it shares with the last one, in the same
// format.
func TestMemoEncodesWhatChanged(t *testing.T) {
	var encoded []string
	enc := func(m Message) ([]byte, error) {
		encoded = append(encoded, m.Content)
		if m.Content == "bad" {
			return nil, errors.New("cannot encode")
		}
		return []byte(fmt.Sprintf("<%s>", m.Content)), nil
	}
	check := func(what string, m *Memo, format string, msgs []Message, want ...string) {
		t.Helper()
		encoded = nil
		out, err := m.Encoded(format, msgs, enc)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if fmt.Sprint(encoded) != fmt.Sprint(want) {
			t.Errorf("%s: encoded %q, want %q", what, encoded, want)
		}
		for i, b := range out {
			if string(b) != "<"+msgs[i].Content+">" {
				t.Errorf("%s: message %d encoded as %s", what, i, b)
			}
		}
	}
	history := []Message{System("s"), User("u1")}
	m := new(Memo)
	check("first request", m, "a", history, "s", "u1")
	history = append(history, Assistant("a1"), User("u2"))
	check("grown", m, "a", history, "a1", "u2")
	check("the same again", m, "a", history)
	trimmed := append([]Message{history[0], User("u1, shortened")}, history[2:]...)
	check("a message changed", m, "a", trimmed, "u1, shortened", "a1", "u2")
	check("another format", m, "b", trimmed, "s", "u1, shortened", "a1", "u2")
	check("shorter", m, "b", trimmed[:2])
	check("no memo", nil, "b", trimmed[:2], "s", "u1, shortened")

	encoded = nil
	if _, err := m.Encoded("b", append(trimmed[:2:2], User("bad"), User("after")), enc); err == nil {
		t.Fatal("an encoding error was not returned")
	}
	check("after an error", m, "b", append(trimmed[:2:2], User("good")), "good")
}

// The tools' encoding is made again whenever a tool or the format differs
// from the last call's, and only then; a nil Memo encodes every time.
func TestMemoEncodesChangedTools(t *testing.T) {
	if n := reflect.TypeFor[ToolSchema]().NumField(); n != 3 {
		t.Fatalf("ToolSchema has %d fields: sameTool compares 3", n)
	}
	calls := 0
	encode := func(ts []ToolSchema) ([]byte, error) {
		calls++
		return json.Marshal(ts)
	}
	schema := json.RawMessage(`{"type":"object"}`)
	tools := []ToolSchema{{Name: "a", Description: "one", InputSchema: schema}, {Name: "b"}}
	m := new(Memo)
	for i, c := range []struct {
		format string
		tools  []ToolSchema
		encode bool
	}{
		{"f", tools, true},
		{"f", slices.Clone(tools), false},
		{"g", tools, true},
		{"g", []ToolSchema{{Name: "a", Description: "two", InputSchema: schema}, {Name: "b"}}, true},
		{"g", []ToolSchema{{Name: "a", Description: "two", InputSchema: json.RawMessage(`{"type":"string"}`)}, {Name: "b"}}, true},
		{"g", []ToolSchema{{Name: "a", Description: "two", InputSchema: json.RawMessage(`{"type":"string"}`)}}, true},
		{"g", []ToolSchema{{Name: "c", Description: "two", InputSchema: json.RawMessage(`{"type":"string"}`)}}, true},
	} {
		before := calls
		got, err := m.EncodedTools(c.format, c.tools, encode)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(c.tools); string(got) != string(want) {
			t.Fatalf("call %d: %s, want %s", i, got, want)
		}
		if encoded := calls > before; encoded != c.encode {
			t.Fatalf("call %d: encoded %v, want %v", i, encoded, c.encode)
		}
	}
	var none *Memo
	for range 2 {
		before := calls
		if _, err := none.EncodedTools("f", tools, encode); err != nil || calls != before+1 {
			t.Fatalf("a nil Memo: %d encodings, %v", calls-before, err)
		}
	}
}
