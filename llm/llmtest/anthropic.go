package llmtest

import (
	"encoding/json"
	"strings"
)

// Anthropic writes answers as the Messages API does: a message body, or the
// events message_start, ping, content_block_start / content_block_delta
// (thinking_delta, text_delta, input_json_delta) / content_block_stop,
// message_delta (stop_reason, output usage) and message_stop; errors as
// {"type":"error","error":{"type","message"}}.
type Anthropic struct{}

var _ Encoder = Anthropic{}

// Streaming reads "stream": true.
func (Anthropic) Streaming(body []byte) bool { return OpenAI{}.Streaming(body) }

func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// ErrorBody is {"type":"error","error":{"type","message"}}.
func (Anthropic) ErrorBody(status int, message string) []byte {
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(status), "message": message}})
}

func stopReason(finish string) string {
	switch finish {
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	default:
		return "end_turn"
	}
}

func (Anthropic) usage(a Answer, output int) map[string]any {
	return map[string]any{
		"input_tokens":                a.Usage.Input - a.Usage.CacheRead,
		"cache_read_input_tokens":     a.Usage.CacheRead,
		"cache_creation_input_tokens": 0,
		"output_tokens":               output,
	}
}

// Body is a message.
func (an Anthropic) Body(a Answer) []byte {
	content := []any{}
	if len(a.Reasoning) > 0 {
		content = append(content, map[string]any{"type": "thinking", "thinking": strings.Join(a.Reasoning, ""), "signature": "sig"})
	}
	if len(a.Text) > 0 {
		content = append(content, map[string]any{"type": "text", "text": strings.Join(a.Text, "")})
	}
	for _, c := range a.Calls {
		input := strings.Join(c.Args, "")
		if input == "" {
			input = "{}"
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(input)})
	}
	return mustJSON(map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": a.model(), "content": content,
		"stop_reason": stopReason(a.finish()), "stop_sequence": nil, "usage": an.usage(a, a.Usage.Output),
	})
}

func event(typ string, data map[string]any) string {
	data["type"] = typ
	return "event: " + typ + "\ndata: " + string(mustJSON(data)) + "\n\n"
}

// Head is message_start (with the input usage) and a ping.
func (an Anthropic) Head(a Answer) []string {
	return []string{
		event("message_start", map[string]any{"message": map[string]any{
			"id": "msg_test", "type": "message", "role": "assistant", "model": a.model(), "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": an.usage(a, 1),
		}}),
		event("ping", map[string]any{}),
	}
}

// Pieces are the content blocks: thinking, text, then one tool_use per call, each
// opened, one delta per piece, and closed.
func (Anthropic) Pieces(a Answer) []string {
	var out []string
	index := 0
	block := func(start map[string]any, deltas []map[string]any) {
		out = append(out, event("content_block_start", map[string]any{"index": index, "content_block": start}))
		for _, d := range deltas {
			out = append(out, event("content_block_delta", map[string]any{"index": index, "delta": d}))
		}
		out = append(out, event("content_block_stop", map[string]any{"index": index}))
		index++
	}
	if len(a.Reasoning) > 0 {
		var ds []map[string]any
		for _, r := range a.Reasoning {
			ds = append(ds, map[string]any{"type": "thinking_delta", "thinking": r})
		}
		ds = append(ds, map[string]any{"type": "signature_delta", "signature": "sig"})
		block(map[string]any{"type": "thinking", "thinking": ""}, ds)
	}
	if len(a.Text) > 0 {
		var ds []map[string]any
		for _, t := range a.Text {
			ds = append(ds, map[string]any{"type": "text_delta", "text": t})
		}
		block(map[string]any{"type": "text", "text": ""}, ds)
	}
	for _, c := range a.Calls {
		var ds []map[string]any
		for _, p := range c.Args {
			ds = append(ds, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		block(map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}, ds)
	}
	return out
}

// Tail is message_delta (stop_reason, output usage) and message_stop.
func (Anthropic) Tail(a Answer) []string {
	return []string{
		event("message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": stopReason(a.finish()), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": a.Usage.Output},
		}),
		event("message_stop", map[string]any{}),
	}
}

// ErrorEvent is an "error" event with an overloaded_error.
func (Anthropic) ErrorEvent(message string) string {
	return event("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": message}})
}
