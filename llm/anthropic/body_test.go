package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// TestBodyAsMarshal: the body written in parts, its messages' blocks kept
// in a memo from one request to the next, is the one json.Marshal writes of
// the whole messagesRequest, byte for byte, as the conversation grows:
// system messages among the others, a step's tool results grouped in one
// user message, empty and blank messages left out, arguments that are no
// object replaced.
func TestBodyAsMarshal(t *testing.T) {
	temp := 0.5
	history := []llm.Message{
		llm.System("You are <helpful> & brief \u2028 \"quoted\"."),
		llm.User("list the files, please"),
		llm.User(""),
		llm.User("and read one"),
		llm.Assistant("  ", llm.ToolCall{ID: "c1", Name: "list_files", Arguments: json.RawMessage(`{"path": "."}`)},
			llm.ToolCall{ID: "c2", Name: "read_file", Arguments: json.RawMessage(`[1]`)}),
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "list_files", Content: "README.md\ngo.mod\n\x00\xff"},
		{Role: llm.RoleTool, ToolCallID: "c2", Name: "read_file", Content: "no", IsError: true},
		llm.System("Be terse."),
		llm.Assistant("Two files."),
		llm.Assistant("More."),
		llm.User("thanks"),
	}
	tools := []llm.ToolSchema{{Name: "list_files", Description: "lists", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "noop"}}
	for _, tc := range []struct {
		name   string
		stream bool
		req    llm.Request
	}{
		{name: "bare", req: llm.Request{}},
		{name: "streamed, with tools and options", stream: true, req: llm.Request{Model: "other", Tools: tools,
			Options: llm.Options{MaxTokens: 64, Temperature: &temp, Stop: []string{"END"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(llm.Config{Provider: llm.ProviderAnthropic, Model: "m", BaseURL: "http://127.0.0.1:1", MaxTokens: 128}, httpx.WithAPIKey("k"))
			if err != nil {
				t.Fatal(err)
			}
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

// reference is the whole messagesRequest for req, as body wrote it before
// it wrote it in parts.
func reference(p *Provider, req llm.Request, stream bool) messagesRequest {
	model := req.Model
	if model == "" {
		model = p.model
	}
	system, msgs := toMessages(req.Messages)
	if msgs == nil {
		msgs = []message{}
	}
	mr := messagesRequest{
		requestHead: requestHead{Model: model, MaxTokens: req.Options.MaxTokens, System: system},
		Messages:    msgs,
		requestRest: requestRest{Tools: toTools(req.Tools), Stream: stream, Temperature: req.Options.Temperature,
			TopP: req.Options.TopP, StopSequences: req.Options.Stop},
	}
	if mr.MaxTokens == 0 {
		mr.MaxTokens = p.maxTokens
	}
	return mr
}
