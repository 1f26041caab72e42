package openai

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// TestBodyAsMarshal: the body written in parts, its messages kept in a memo
// from one request to the next, is the one json.Marshal writes of the whole
// chatRequest, byte for byte, as the conversation grows, for every setting
// that shapes it.
func TestBodyAsMarshal(t *testing.T) {
	temp, topP := 0.25, 0.9
	history := []llm.Message{
		llm.System("You are <helpful> & brief \u2028 \"quoted\"."),
		llm.User("list the files, please"),
		llm.Assistant("", llm.ToolCall{ID: "c1", Name: "list_files", Arguments: json.RawMessage(`{"path": "."}`)}),
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "list_files", Content: "README.md\ngo.mod\n\x00\xff"},
		llm.Assistant("Two files.", llm.ToolCall{ID: "c2", Name: "noop"}),
		{Role: llm.RoleTool, ToolCallID: "c2", Name: "noop", Content: "ok", IsError: true},
		llm.Assistant("done"),
	}
	tools := []llm.ToolSchema{{Name: "list_files", Description: "lists", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "noop"}}
	for _, tc := range []struct {
		name   string
		capped bool
		stream bool
		req    llm.Request
	}{
		{name: "bare", req: llm.Request{}},
		{name: "streamed, with tools and options", stream: true, req: llm.Request{Model: "other", Tools: tools,
			Options: llm.Options{MaxTokens: 64, Temperature: &temp, TopP: &topP, Stop: []string{"END"}}}},
		{name: "max_completion_tokens", capped: true, req: llm.Request{Tools: tools}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := llm.Config{Provider: llm.ProviderOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1", MaxTokens: 128}
			p, err := New(cfg, httpx.WithAPIKey("k"))
			if err != nil {
				t.Fatal(err)
			}
			p.completionsCap = tc.capped
			memo := new(llm.Memo)
			for n := 0; n <= len(history); n++ {
				req := tc.req
				req.Messages = history[:n]
				if llm.CheckPairing(req.Messages) != nil {
					continue // refused before it is encoded
				}
				got, err := p.body(memo, req, tc.stream)
				if err != nil {
					t.Fatal(err)
				}
				want, err := json.Marshal(reference(p, req, tc.stream))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("%d messages:\n got %s\nwant %s", n, got, want)
				}
			}
		})
	}
}

// reference is the whole chatRequest for req, as body wrote it before it
// wrote it in parts.
func reference(p *Provider, req llm.Request, stream bool) chatRequest {
	model := req.Model
	if model == "" {
		model = p.model
	}
	cr := chatRequest{Model: model, Messages: []chatMessage{}}
	for _, m := range req.Messages {
		cr.Messages = append(cr.Messages, toMessage(m))
	}
	cr.Tools, cr.Stream = toTools(req.Tools), stream
	cr.Temperature, cr.TopP, cr.Stop = req.Options.Temperature, req.Options.TopP, req.Options.Stop
	if stream {
		cr.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	maxTokens := req.Options.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if p.completionsCap {
		cr.MaxCompletionTokens = maxTokens
	} else {
		cr.MaxTokens = maxTokens
	}
	return cr
}

// BenchmarkBody encodes the body of a long conversation's next request,
// its tools offered, with and without a memo of the last one.
func BenchmarkBody(b *testing.B) {
	p, err := New(llm.Config{Provider: llm.ProviderOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1"}, httpx.WithAPIKey("k"))
	if err != nil {
		b.Fatal(err)
	}
	history := []llm.Message{llm.System("You are a helpful agent.")}
	for i := range 100 {
		id := fmt.Sprintf("call_%d", i)
		history = append(history, llm.User("list the files of the project, please"),
			llm.Assistant("", llm.ToolCall{ID: id, Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`)}),
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "list_files", Content: "README.md\ngo.mod\ngo.sum\nmain.go\nmain_test.go\ninternal/\ndocs/\n"},
			llm.Assistant("The project holds README.md, go.mod, main.go and its test, internal/ and docs/."))
	}
	// Tools like the built-in ones, with schemas of their size.
	var tools []llm.ToolSchema
	for _, name := range []string{"list_files", "read_file", "write_file", "search"} {
		tools = append(tools, llm.ToolSchema{Name: name, Description: "Does " + name + " on a path of the project, relative to its root; see the schema for the limits.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Path relative to the project root. Default: the root (\".\")."},` +
				`"recursive":{"type":"boolean","description":"Go into subdirectories too, depth first, down to 4 levels. Default: false."},` +
				`"max_entries":{"type":"integer","minimum":1,"maximum":1000,"description":"Most entries to return. Default and maximum: 1000."}},"additionalProperties":false}`)})
	}
	for _, memo := range []*llm.Memo{nil, new(llm.Memo)} {
		b.Run(fmt.Sprintf("memo=%t", memo != nil), func(b *testing.B) {
			for b.Loop() {
				if _, err := p.body(memo, llm.Request{Messages: history, Tools: tools}, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
