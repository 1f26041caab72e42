package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// The request body of POST /chat/completions. The provider writes it in
// parts (assemble: the model, each message as llm.Memo kept it, then
// requestRest), as json.Marshal writes this struct (TestBodyAsMarshal).
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	requestRest
}

// requestRest is chatRequest after its messages.
type requestRest struct {
	Tools               []chatTool     `json:"tools,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is null on an assistant message that only calls tools.
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// The answer: a chat.completion, or a chat.completion.chunk when streamed.
type chatResponse struct {
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
	Error   *apiError    `json:"error"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      *answerBody `json:"message"`
	Delta        *answerBody `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type answerBody struct {
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content"`
	Reasoning        string         `json:"reasoning"`
	ToolCalls        []chatToolCall `json:"tool_calls"`
}

func (b *answerBody) reasoning() string {
	if b.ReasoningContent != "" {
		return b.ReasoningContent
	}
	return b.Reasoning
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) usage() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	out := llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// apiError is {"error": {...}} in an error body or an error chunk of a stream.
type apiError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// UnmarshalJSON also takes the {"error": "text"} of Ollama and llama.cpp.
func (e *apiError) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = apiError{Message: s}
		return nil
	}
	type plain apiError
	return json.Unmarshal(b, (*plain)(e))
}

// providerError turns an error the server reported inside an answer into a
// *llm.ProviderError, classified by its code or type.
func (e *apiError) providerError() *llm.ProviderError {
	msg := e.Message
	if msg == "" {
		msg = "the server reported an error without a message"
	}
	code := strings.Trim(string(e.Code), `"`)
	status, _ := strconv.Atoi(code)
	kind := strings.ToLower(e.Type + " " + code)
	var sentinel error
	switch {
	case status != 0:
		sentinel = httpx.StatusError(status)
	case strings.Contains(kind, "rate_limit"):
		sentinel = llm.ErrRateLimited
	case strings.Contains(kind, "invalid_request"), strings.Contains(kind, "context_length"):
		sentinel = llm.ErrBadRequest
	default:
		sentinel = llm.ErrUnavailable
	}
	return &llm.ProviderError{Provider: Name, Status: status, Message: msg, Err: sentinel}
}

func ptr(s string) *string { return &s }

// toMessage maps one message of the conversation onto a Chat Completions
// message.
func toMessage(m llm.Message) chatMessage {
	cm := chatMessage{Role: string(m.Role), Content: ptr(m.Content)}
	switch m.Role {
	case llm.RoleAssistant:
		for _, c := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
				ID: c.ID, Type: "function",
				Function: chatFunction{Name: c.Name, Arguments: httpx.ArgumentsText(c.Arguments)},
			})
		}
		if len(cm.ToolCalls) > 0 && m.Content == "" {
			cm.Content = nil
		}
	case llm.RoleTool:
		cm.ToolCallID = m.ToolCallID
	}
	return cm
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

func toTools(tools []llm.ToolSchema) []chatTool {
	out := make([]chatTool, 0, len(tools))
	for _, t := range tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = emptyObjectSchema
		}
		out = append(out, chatTool{Type: "function", Function: toolFunction{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	return out
}

// finishReason maps Chat Completions' finish_reason.
func finishReason(s string, hasCalls bool) llm.FinishReason {
	switch s {
	case "stop", "":
		if hasCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "length":
		return llm.FinishLength
	case "content_filter":
		return llm.FinishContentFilter
	default:
		return llm.FinishOther
	}
}
