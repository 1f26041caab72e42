package llmtest

import (
	"encoding/json"
	"strings"
)

// OpenAI writes answers as the Chat Completions API does: a chat.completion body,
// or chat.completion.chunk events ("data: {...}" then "data: [DONE]"), with tool
// calls as delta.tool_calls[] pieces carrying their index, and the usage in a last
// chunk with no choices (stream_options.include_usage).
type OpenAI struct{}

var _ Encoder = OpenAI{}

// Streaming reads "stream": true.
func (OpenAI) Streaming(body []byte) bool {
	var v struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Stream
}

// ErrorBody is {"error": {"message", "type", "param", "code"}}.
func (OpenAI) ErrorBody(status int, message string) []byte {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == 401:
		code = "invalid_api_key"
	case status == 429:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
}

func (OpenAI) usage(a Answer) map[string]any {
	return map[string]any{
		"prompt_tokens":             a.Usage.Input,
		"completion_tokens":         a.Usage.Output,
		"total_tokens":              a.Usage.Input + a.Usage.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": a.Usage.CacheRead},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0},
	}
}

// Body is a chat.completion.
func (o OpenAI) Body(a Answer) []byte {
	msg := map[string]any{"role": "assistant", "content": nil}
	if len(a.Text) > 0 {
		msg["content"] = strings.Join(a.Text, "")
	}
	if len(a.Reasoning) > 0 {
		msg["reasoning_content"] = strings.Join(a.Reasoning, "")
	}
	if len(a.Calls) > 0 {
		var calls []any
		for _, c := range a.Calls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": strings.Join(c.Args, "")}})
		}
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": a.model(),
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finish()}},
		"usage":   o.usage(a),
	})
}

func (OpenAI) chunk(a Answer, choices []any, usage any) string {
	return "data: " + string(mustJSON(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": a.model(),
		"system_fingerprint": "fp_test", "choices": choices, "usage": usage,
	})) + "\n\n"
}

func (o OpenAI) delta(a Answer, delta map[string]any) string {
	return o.chunk(a, []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nil}}, nil)
}

// Head is the first chunk, with the role.
func (o OpenAI) Head(a Answer) []string {
	return []string{o.delta(a, map[string]any{"role": "assistant", "content": "", "refusal": nil})}
}

// Pieces are one chunk per piece of reasoning, text and tool call arguments; a
// tool call's first chunk carries its index, id, type and name.
func (o OpenAI) Pieces(a Answer) []string {
	var out []string
	for _, r := range a.Reasoning {
		out = append(out, o.delta(a, map[string]any{"reasoning_content": r}))
	}
	for _, t := range a.Text {
		out = append(out, o.delta(a, map[string]any{"content": t}))
	}
	for i, c := range a.Calls {
		out = append(out, o.delta(a, map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""},
		}}}))
		for _, p := range c.Args {
			out = append(out, o.delta(a, map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}}))
		}
	}
	return out
}

// Tail is the chunk with the finish_reason, the usage chunk and [DONE].
func (o OpenAI) Tail(a Answer) []string {
	return []string{
		o.chunk(a, []any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": a.finish()}}, nil),
		o.chunk(a, []any{}, o.usage(a)),
		"data: [DONE]\n\n",
	}
}

// ErrorEvent is a data chunk holding {"error": {...}}, as OpenAI sends when a
// stream fails.
func (OpenAI) ErrorEvent(message string) string {
	return "data: " + string(mustJSON(map[string]any{"error": map[string]any{
		"message": message, "type": "server_error", "param": nil, "code": nil,
	}})) + "\n\n"
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
