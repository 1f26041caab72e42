package llm

import "encoding/json"

// ToolSchema describes a tool to the model.
type ToolSchema struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the tool's input object.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Options are the sampling settings of one request. Zero values mean "the
// provider's default".
type Options struct {
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
}

// Request is one call to a model. It is recorded as sent, so it never holds
// credentials: API keys belong to the provider's configuration.
type Request struct {
	Model    string       `json:"model,omitempty"`
	Messages []Message    `json:"messages"`
	Tools    []ToolSchema `json:"tools,omitempty"`
	Options  Options      `json:"options,omitzero"`
}

// FinishReason says why the model stopped.
type FinishReason string

// The finish reasons every provider's own values are mapped onto.
const (
	FinishStop          FinishReason = "stop"           // a natural end of the answer
	FinishToolCalls     FinishReason = "tool_calls"     // the model asks for tools
	FinishLength        FinishReason = "length"         // the output token limit was hit
	FinishContentFilter FinishReason = "content_filter" // the provider withheld content
	FinishOther         FinishReason = "other"          // anything the provider did not explain
)

// Usage counts the tokens of one or more calls.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadTokens are input tokens served from the provider's prompt cache.
	CacheReadTokens int `json:"cache_read_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:     u.InputTokens + v.InputTokens,
		OutputTokens:    u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens,
	}
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Response is a model's complete answer to one Request.
type Response struct {
	// Model is the model that answered, as the provider names it.
	Model   string `json:"model,omitempty"`
	Content string `json:"content,omitempty"`
	// Reasoning is the model's visible thinking, where the provider exposes it.
	Reasoning    string       `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall   `json:"tool_calls,omitempty"`
	FinishReason FinishReason `json:"finish_reason,omitempty"`
	Usage        Usage        `json:"usage"`
}

// Message is the assistant message that records r in the conversation.
func (r Response) Message() Message {
	return Assistant(r.Content, r.ToolCalls...).Clone()
}
