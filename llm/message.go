package llm

import (
	"encoding/json"
	"unicode/utf8"
)

// Role says who a message is from.
type Role string

// The roles of the model-visible conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// Message is one entry of the model-visible conversation.
//
// An assistant message may carry ToolCalls; each call is answered by exactly one
// tool message whose ToolCallID names it. Providers reject a conversation in which a
// call has no result or a result has no call, so every transformation of a history
// keeps them paired.
type Message struct {
	Role    Role   `json:"role" jsonschema:"enum=system,enum=user,enum=assistant,enum=tool"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message (some providers want it).
	Name string `json:"name,omitempty"`
	// IsError marks a tool result that reports a failure.
	IsError bool `json:"is_error,omitempty"`
	// Steer marks a user message that joined a turn while it ran (a steer
	// input, recorded in turn.steered) rather than starting one: it belongs
	// to the turn before it (StartsTurn). Providers send it as any user
	// message. Only the node sets it.
	Steer bool `json:"steer,omitempty"`
}

// StartsTurn reports whether m opens a turn of the history: a user
// message that is not a steer.
func (m Message) StartsTurn() bool { return m.Role == RoleUser && !m.Steer }

// ToolCall is a model's request to run one tool.
type ToolCall struct {
	// ID is the provider's call id; tool results refer to it.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON object the model wrote. It is kept as the model sent it;
	// a malformed value is reported by the tool runner, not here.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// System returns a system message.
func System(content string) Message { return Message{Role: RoleSystem, Content: content} }

// User returns a user message.
func User(content string) Message { return Message{Role: RoleUser, Content: content} }

// Assistant returns an assistant message, with the tool calls it asks for.
func Assistant(content string, calls ...ToolCall) Message {
	return Message{Role: RoleAssistant, Content: content, ToolCalls: calls}
}

// ToolResult returns the tool message that answers call.
func ToolResult(call ToolCall, content string, isError bool) Message {
	return Message{Role: RoleTool, ToolCallID: call.ID, Name: call.Name, Content: content, IsError: isError}
}

// Clone returns a deep copy of m: its tool calls and their arguments are not shared.
func (m Message) Clone() Message {
	if m.ToolCalls != nil {
		calls := make([]ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			if c.Arguments != nil {
				c.Arguments = append(json.RawMessage(nil), c.Arguments...)
			}
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	return m
}

// CloneMessages returns a deep copy of msgs.
func CloneMessages(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Clone()
	}
	return out
}

// Chars is the size of a message as the context budget counts it: its content, and
// the name and arguments of each tool call. Budgets are in characters (runes), not
// tokens, so that they need no tokenizer and are the same for every provider.
func (m Message) Chars() int {
	n := utf8.RuneCountInString(m.Content)
	for _, c := range m.ToolCalls {
		n += utf8.RuneCountInString(c.Name) + utf8.RuneCount(c.Arguments)
	}
	return n
}

// TotalChars is the sum of Chars over msgs.
func TotalChars(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += m.Chars()
	}
	return n
}
