package llm

import (
	"strconv"

	"github.com/tah-dev/tah/internal/jsonx"
)

// The AppendJSON methods append what json.Marshal writes of a value, byte
// for byte, without its reflection: the log's writer, the read model and
// the request hash encode these values at every step (FuzzAppendJSON holds
// them to Marshal). ok is false, with b left for the caller to drop, when
// a value holds raw JSON that Marshal would compact or refuse (a tool
// call's arguments not in jsonx.MarshalForm): Marshal is then the one to
// ask.

// AppendJSON appends c as json.Marshal writes it.
func (c ToolCall) AppendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, c.ID)
	b = append(b, `,"name":`...)
	b = jsonx.AppendString(b, c.Name)
	if len(c.Arguments) > 0 {
		if !jsonx.MarshalForm(c.Arguments) {
			return b, false
		}
		b = append(b, `,"arguments":`...)
		b = append(b, c.Arguments...)
	}
	return append(b, '}'), true
}

// AppendToolCallsJSON appends calls as json.Marshal writes the slice (null
// for nil).
func AppendToolCallsJSON(b []byte, calls []ToolCall) (_ []byte, ok bool) {
	if calls == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = c.AppendJSON(b); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// AppendJSON appends r as json.Marshal writes it.
func (r Response) AppendJSON(b []byte) (_ []byte, ok bool) {
	sep := byte('{')
	field := func(k string) {
		b = append(b, sep, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		sep = ','
	}
	if r.Model != "" {
		field("model")
		b = jsonx.AppendString(b, r.Model)
	}
	if r.Content != "" {
		field("content")
		b = jsonx.AppendString(b, r.Content)
	}
	if r.Reasoning != "" {
		field("reasoning")
		b = jsonx.AppendString(b, r.Reasoning)
	}
	if len(r.ToolCalls) > 0 {
		field("tool_calls")
		if b, ok = AppendToolCallsJSON(b, r.ToolCalls); !ok {
			return b, false
		}
	}
	if r.FinishReason != "" {
		field("finish_reason")
		b = jsonx.AppendString(b, string(r.FinishReason))
	}
	field("usage")
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(r.Usage.InputTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(r.Usage.OutputTokens), 10)
	if r.Usage.CacheReadTokens != 0 {
		b = append(b, `,"cache_read_tokens":`...)
		b = strconv.AppendInt(b, int64(r.Usage.CacheReadTokens), 10)
	}
	return append(b, '}', '}'), true
}

// AppendJSON appends m as json.Marshal writes it.
func (m Message) AppendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"role":`...)
	b = jsonx.AppendString(b, string(m.Role))
	if m.Content != "" {
		b = append(b, `,"content":`...)
		b = jsonx.AppendString(b, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":`...)
		if b, ok = AppendToolCallsJSON(b, m.ToolCalls); !ok {
			return b, false
		}
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = jsonx.AppendString(b, m.ToolCallID)
	}
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = jsonx.AppendString(b, m.Name)
	}
	if m.IsError {
		b = append(b, `,"is_error":true`...)
	}
	if m.Steer {
		b = append(b, `,"steer":true`...)
	}
	return append(b, '}'), true
}
