package event

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// wantAsMarshal fails t unless New writes p's payload as json.Marshal does,
// and reports whether it went through p's appendJSON.
func wantAsMarshal(t *testing.T, typ Type, p any) (fast bool) {
	t.Helper()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", p, err)
	}
	e, err := New("s_1", typ, p)
	if err != nil {
		t.Fatalf("New(%s, %#v): %v", typ, p, err)
	}
	if string(e.Data) != string(want) {
		t.Fatalf("New(%s) wrote\n%s\nMarshal writes\n%s", typ, e.Data, want)
	}
	a, ok := p.(appender)
	if !ok {
		t.Fatalf("%T has no appendJSON", p)
	}
	_, fast = a.appendJSON(nil)
	return fast
}

func TestAppendJSONAsMarshal(t *testing.T) {
	s := samplePayloads()
	temp, topP := 0.25, 1e-7
	more := map[Type][]any{
		LLMStarted: {
			LLMStartedData{StepID: "llm1.1", RequestRef: RequestRef{RequestSHA256: "ab"}},
			LLMStartedData{StepID: "llm1.1", RequestRef: RequestRef{Options: llm.Options{Stop: []string{}}}},
			LLMStartedData{StepID: "llm1.1", RequestRef: RequestRef{Options: llm.Options{Temperature: &temp, TopP: &topP}}},
			LLMStartedData{StepID: "llm1.1", Trim: &TrimReport{OverBudget: true, TurnsDropped: 3, CurrentOutputsOmitted: 1}},
			LLMStartedData{StepID: "llm1.1", Request: llm.Request{Model: "m"}}, // recorded whole: left to Marshal
		},
		LLMCompleted: {
			LLMCompletedData{},
			LLMCompletedData{StepID: "llm1.1", Response: llm.Response{FinishReason: llm.FinishStop}, Cost: &pricing.Cost{USD: 3e-9}},
			LLMCompletedData{StepID: "llm1.1", Response: llm.Response{ToolCalls: []llm.ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(" { } ")}}}},
		},
		ToolStarted:  {ToolStartedData{}, ToolStartedData{StepID: "t", Call: llm.ToolCall{ID: "c", Arguments: json.RawMessage("[1, 2]")}}},
		ToolFinished: {ToolFinishedData{}, ToolFinishedData{CallID: "c", Output: "\x00\x1f\t"}},
	}
	for _, typ := range []Type{LLMStarted, LLMCompleted, ToolStarted, ToolFinished} {
		for i, p := range append(s[typ], more[typ]...) {
			// The first sample of each type is a tool step's, which Marshal
			// must not be needed for.
			if fast := wantAsMarshal(t, typ, p); i == 0 && !fast {
				t.Errorf("New(%s) of a step's payload went through Marshal", typ)
			}
		}
	}
	// A tool step's payloads, as the loop makes them, are folded without
	// reflection.
	call := llm.ToolCall{ID: "call_1", Name: "noop", Arguments: json.RawMessage(`{}`)}
	for _, p := range []roundTripper{
		LLMStartedData{StepID: "llm2.3", Turn: 2, RequestRef: RequestRef{History: 9, ContextChars: 4000, Model: "m", Tools: []string{"noop"}, ToolsDigest: "ab", RequestSHA256: "cd"}},
		LLMCompletedData{StepID: "llm2.3", Response: llm.Response{Model: "m", ToolCalls: []llm.ToolCall{call}, FinishReason: llm.FinishToolCalls}, Cost: &pricing.Cost{Unpriced: 1}},
		ToolStartedData{StepID: "tool2.4", Call: call, Runner: "local"},
		ToolFinishedData{StepID: "tool2.4", CallID: "call_1", Name: "noop", Output: "ok"},
	} {
		if !p.surelyRoundTrips() {
			t.Errorf("surelyRoundTrips(%#v) is false", p)
		}
	}
	// What appendJSON leaves to Marshal: Marshal's own errors come back.
	for _, p := range []any{
		LLMCompletedData{StepID: "s", Cost: &pricing.Cost{USD: math.NaN()}},
		ToolStartedData{StepID: "s", Call: llm.ToolCall{ID: "c", Arguments: json.RawMessage("{nope")}},
	} {
		if _, err := New("s_1", typeOf(p), p); err == nil {
			t.Errorf("New(%#v) wrote it; Marshal refuses it", p)
		}
	}
	var nilStarted *ToolStartedData
	if e, err := New("s_1", ToolStarted, nilStarted); err != nil || string(e.Data) != "null" {
		t.Errorf("New of a nil payload = %s, %v; want Marshal's null", e.Data, err)
	}
}

func typeOf(p any) Type {
	switch p.(type) {
	case LLMCompletedData:
		return LLMCompleted
	case ToolStartedData:
		return ToolStarted
	}
	panic(p)
}

// FuzzAppendJSONAsMarshal holds the payloads of a step, made of any strings,
// numbers and raw arguments, to Marshal's bytes.
func FuzzAppendJSONAsMarshal(f *testing.F) {
	f.Add("llm4.1", "Let me look.", `{"path":"a/b.txt"}`, "line \"2\" <tag> & more\u2028", 12, 0.001234567, true)
	f.Add("", "", "", "", 0, 0.0, false)
	f.Add("\xff", "é\n", `{"q":"<b>&"}`, "\x00", -5, 1e21, true)
	f.Add("s", "x", `[1, 2.5 ,-3e2]`, "\xed\xa0\x80", 1<<40, -2.5e-300, false)
	f.Fuzz(func(t *testing.T, id, text, args, output string, n int, usd float64, flag bool) {
		call := llm.ToolCall{ID: id, Name: text, Arguments: json.RawMessage(args)}
		var trim *TrimReport
		if flag {
			trim = &TrimReport{Budget: n, BeforeChars: -n, OutputsOmitted: n, OverBudget: flag}
		}
		var art *ArtifactRef
		if n%2 == 0 {
			art = &ArtifactRef{Bucket: id, Object: output, Size: int64(n), SHA256: text}
		}
		opts := llm.Options{MaxTokens: n}
		if flag {
			opts.Temperature, opts.Stop = &usd, []string{text, id}
		}
		payloads := map[Type]any{
			LLMStarted: LLMStartedData{StepID: id, Turn: n, Trim: trim, RequestRef: RequestRef{History: n, ContextChars: n / 3,
				Model: text, Options: opts, Tools: []string{id, text}, ToolsDigest: output, RequestSHA256: id}},
			LLMCompleted: &LLMCompletedData{StepID: id, Artifact: art, DurationMS: int64(n), Cost: &pricing.Cost{USD: usd, Unpriced: n},
				Response: llm.Response{Model: id, Content: text, Reasoning: output, ToolCalls: []llm.ToolCall{call, call},
					FinishReason: llm.FinishReason(id), Usage: llm.Usage{InputTokens: n, OutputTokens: -n, CacheReadTokens: n}}},
			ToolStarted:  ToolStartedData{StepID: id, Call: call, Idempotent: flag, Runner: text},
			ToolFinished: ToolFinishedData{StepID: id, CallID: text, Name: id, Output: output, IsError: flag, Code: text, Artifact: art, DurationMS: int64(n)},
		}
		ref := payloads[LLMStarted].(LLMStartedData).RequestRef
		if got, ok := ref.AppendJSON(nil); ok {
			if want, err := json.Marshal(ref); err != nil || string(got) != string(want) {
				t.Fatalf("RequestRef.AppendJSON wrote\n%s\nMarshal writes\n%s (%v)", got, want, err)
			}
		} else if !math.IsNaN(usd) && !math.IsInf(usd, 0) {
			t.Fatalf("RequestRef.AppendJSON left %#v to Marshal", ref)
		}
		for typ, p := range payloads {
			want, err := json.Marshal(p)
			e, newErr := New("s_1", typ, p)
			switch {
			case err != nil && newErr == nil:
				t.Fatalf("New(%s) wrote %s; Marshal refuses it: %v", typ, e.Data, err)
			case err == nil && newErr != nil:
				t.Fatalf("New(%s): %v; Marshal writes %s", typ, newErr, want)
			case err == nil && string(e.Data) != string(want):
				t.Fatalf("New(%s) wrote\n%s\nMarshal writes\n%s", typ, e.Data, want)
			}
			// What surelyRoundTrips says comes back as it is, does.
			if err == nil && p.(roundTripper).surelyRoundTrips() {
				v := reflect.Indirect(reflect.ValueOf(p))
				back := reflect.New(v.Type())
				if !roundTrips(v, false) || json.Unmarshal(want, back.Interface()) != nil || !reflect.DeepEqual(back.Elem().Interface(), v.Interface()) {
					t.Fatalf("%s: surelyRoundTrips of %#v, which comes back as %#v", typ, v.Interface(), back.Elem().Interface())
				}
			}
			// What New writes, Decode reads without Unmarshal (but for raw
			// arguments that are not UTF-8, which Marshal copies as they
			// are) and as Unmarshal does.
			if err == nil && !wantAsUnmarshal(t, typ, e.Data) && utf8.Valid(e.Data) {
				t.Fatalf("decodeJSON(%s) left what New wrote to Unmarshal: %s", typ, e.Data)
			}
		}
	})
}

// BenchmarkAppendJSON is each step payload's encoding by appendJSON against
// json.Marshal, in the same run.
func BenchmarkAppendJSON(b *testing.B) {
	s := samplePayloads()
	for _, typ := range []Type{LLMStarted, LLMCompleted, ToolStarted, ToolFinished} {
		p := s[typ][0]
		b.Run(string(typ)+"/Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(typ)+"/appendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := p.(appender).appendJSON(nil); !ok {
					b.Fatal("left to Marshal")
				}
			}
		})
	}
}
