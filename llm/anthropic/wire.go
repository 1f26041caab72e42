package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// The request body of POST /v1/messages. The provider writes it in parts
// (assemble: requestHead, each message's blocks as llm.Memo kept them, then
// requestRest), as json.Marshal writes this struct (TestBodyAsMarshal).
type messagesRequest struct {
	requestHead
	Messages []message `json:"messages"`
	requestRest
}

// requestHead is messagesRequest before its messages.
type requestHead struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	System    string `json:"system,omitempty"`
}

// requestRest is messagesRequest after its messages.
type requestRest struct {
	Tools         []tool   `json:"tools,omitempty"`
	Stream        bool     `json:"stream,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"top_p,omitempty"`
	StopSequences []string `json:"stop_sequences,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block, in a request or an answer.
type block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	// thinking (answers only)
	Thinking string `json:"thinking,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// The answer: a message, or the events of a stream.
type messageAnswer struct {
	Model      string  `json:"model"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      usage   `json:"usage"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func (u usage) input() int {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

func (u usage) usage() llm.Usage {
	return llm.Usage{InputTokens: u.input(), OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens}
}

// streamEvent is the data of any streamed event; Type says which fields are set.
type streamEvent struct {
	Type         string          `json:"type"`
	Message      *messageAnswer  `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *block          `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        *usage          `json:"usage"`
	Error        *apiError       `json:"error"`
}

type blockDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
}

type messageDelta struct {
	StopReason string `json:"stop_reason"`
}

// apiError is the "error" object of an error body or an error event.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *apiError) providerError() *llm.ProviderError {
	msg := e.Message
	if msg == "" {
		msg = e.Type
	}
	if msg == "" {
		msg = "the server reported an error without a message"
	}
	var sentinel error
	switch e.Type {
	case "rate_limit_error":
		sentinel = llm.ErrRateLimited
	case "overloaded_error", "api_error", "timeout_error", "":
		sentinel = llm.ErrUnavailable
	default:
		sentinel = llm.ErrBadRequest
	}
	return &llm.ProviderError{Provider: Name, Message: msg, Err: sentinel}
}

var emptyObject = json.RawMessage(`{}`)

// toMessages maps the conversation onto the API's system text and
// messages: the system messages joined, and each other message's blocks
// (blocksOf) in a message of its role, consecutive blocks of one role in one
// message (the API wants the roles to alternate: the results of one step's
// calls go together).
func toMessages(msgs []llm.Message) (system string, out []message) {
	for _, m := range msgs {
		role, blocks := blocksOf(m)
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	return systemOf(msgs), out
}

// systemOf is the conversation's system text: its system messages that are
// not blank, joined.
func systemOf(msgs []llm.Message) string {
	var sys []string
	for _, m := range msgs {
		if m.Role == llm.RoleSystem && strings.TrimSpace(m.Content) != "" {
			sys = append(sys, m.Content)
		}
	}
	return strings.Join(sys, "\n\n")
}

// roleOf is the role of m's blocks among the messages: a tool result is
// the user's; "" for a system message.
func roleOf(m llm.Message) string {
	switch m.Role {
	case llm.RoleUser, llm.RoleTool:
		return "user"
	case llm.RoleAssistant:
		return "assistant"
	}
	return ""
}

// blocksOf is m's part of the messages: its role there (roleOf) and its
// blocks, none for a system message (systemOf) or an empty one.
func blocksOf(m llm.Message) (string, []block) {
	switch m.Role {
	case llm.RoleUser:
		if m.Content != "" {
			return "user", []block{{Type: "text", Text: m.Content}}
		}
	case llm.RoleAssistant:
		var blocks []block
		if strings.TrimSpace(m.Content) != "" {
			blocks = append(blocks, block{Type: "text", Text: m.Content})
		}
		for _, c := range m.ToolCalls {
			input := json.RawMessage(httpx.ArgumentsText(c.Arguments))
			if !json.Valid(input) || !strings.HasPrefix(strings.TrimSpace(string(input)), "{") {
				input = emptyObject // the API takes only an object
			}
			blocks = append(blocks, block{Type: "tool_use", ID: c.ID, Name: c.Name, Input: input})
		}
		return "assistant", blocks
	case llm.RoleTool:
		return "user", []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError}}
	}
	return "", nil
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

func toTools(tools []llm.ToolSchema) []tool {
	out := make([]tool, 0, len(tools))
	for _, t := range tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = emptyObjectSchema
		}
		out = append(out, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}

// finishReason maps stop_reason.
func finishReason(s string) llm.FinishReason {
	switch s {
	case "end_turn", "stop_sequence", "":
		return llm.FinishStop
	case "tool_use":
		return llm.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "refusal":
		return llm.FinishContentFilter
	default:
		return llm.FinishOther
	}
}
