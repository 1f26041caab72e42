package llm

import (
	"encoding/json"
	"testing"

	"github.com/tah-dev/tah/internal/jsonx"
)

// FuzzAppendJSON holds the AppendJSON methods to json.Marshal's bytes: the
// same, or ok false where Marshal compacts or refuses the arguments.
func FuzzAppendJSON(f *testing.F) {
	f.Add("call_1", "read_file", `{"path":"a/b.txt"}`, "line \"2\" <tag> & more\u2028", 12, true)
	f.Add("", "", "", "", 0, false)
	f.Add("\xff", "é\n", `{"q":"<b>&"}`, "\x00", -5, true)
	f.Add("s", "x", `[1, 2.5 ,-3e2]`, "\xed\xa0\x80", 1<<40, false)
	f.Add("s", "x", `"\xdf"`, "", 1, false)
	f.Fuzz(func(t *testing.T, id, text, args, content string, n int, flag bool) {
		call := ToolCall{ID: id, Name: text, Arguments: json.RawMessage(args)}
		calls := []ToolCall{call, {ID: text, Name: id}}
		if flag {
			calls = nil
		}
		m := Message{Role: Role(text), Content: content, ToolCalls: calls, ToolCallID: id, Name: text, IsError: flag, Steer: !flag}
		r := Response{Model: id, Content: content, Reasoning: text, ToolCalls: calls, FinishReason: FinishReason(id),
			Usage: Usage{InputTokens: n, OutputTokens: -n, CacheReadTokens: n / 2}}
		check := func(what string, v any, got []byte, ok bool) {
			t.Helper()
			want, err := json.Marshal(v)
			switch {
			case ok && err != nil:
				t.Fatalf("%s wrote %s; Marshal refuses it: %v", what, got, err)
			case ok && string(got) != string(want):
				t.Fatalf("%s wrote\n%s\nMarshal writes\n%s", what, got, want)
			case !ok && (args == "" || jsonx.MarshalForm([]byte(args))):
				t.Fatalf("%s left to Marshal arguments in its form: %s", what, args)
			}
		}
		got, ok := call.AppendJSON(nil)
		check("ToolCall.AppendJSON", call, got, ok)
		got, ok = AppendToolCallsJSON(nil, calls)
		check("AppendToolCallsJSON", calls, got, ok)
		got, ok = m.AppendJSON(nil)
		check("Message.AppendJSON", m, got, ok)
		got, ok = r.AppendJSON(nil)
		check("Response.AppendJSON", r, got, ok)
	})
}
