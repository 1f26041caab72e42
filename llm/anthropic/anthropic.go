package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// Defaults of the configuration.
const (
	// Name is the provider's name in errors and in llm.Config.Provider.
	Name             = llm.ProviderAnthropic
	DefaultBaseURL   = "https://api.anthropic.com"
	DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"
	// DefaultMaxTokens is max_tokens when neither the request nor the
	// configuration sets it.
	DefaultMaxTokens = 4096
	// Version is the anthropic-version header sent.
	Version = "2023-06-01"
)

// Provider talks to the Messages API. It is safe for concurrent use.
type Provider struct {
	model     string
	endpoint  string
	key       string
	maxTokens int
	client    *httpx.Client
}

var _ llm.Streamer = (*Provider)(nil)

// New returns the provider that cfg describes (cfg.Provider must be "anthropic" or
// empty). The API key is read now, from the variable cfg.APIKeyEnv names (default
// ANTHROPIC_API_KEY) or from httpx.WithAPIKey; it is required for the default base
// URL. The error wraps llm.ErrConfig.
func New(cfg llm.Config, opts ...httpx.Option) (*Provider, error) {
	if cfg.Provider != "" && cfg.Provider != Name {
		return nil, fmt.Errorf("anthropic: the configuration is for provider %q: %w", cfg.Provider, llm.ErrConfig)
	}
	cfg.Provider = Name
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := httpx.Apply(opts)
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	env := cfg.APIKeyEnv
	if env == "" {
		env = DefaultAPIKeyEnv
	}
	key, ok := s.Key(env)
	if u, _ := url.Parse(base); !ok && u != nil && u.Hostname() == "api.anthropic.com" {
		return nil, fmt.Errorf("anthropic: no API key: set the environment variable %s: %w", env, llm.ErrConfig)
	}
	maxTokens := cfg.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	// The base URL may or may not end in /v1, as with the official SDKs.
	endpoint := httpx.Endpoint(base, "v1/messages")
	if strings.HasSuffix(strings.TrimRight(base, "/"), "/v1") {
		endpoint = httpx.Endpoint(base, "messages")
	}
	return &Provider{
		model:     cfg.Model,
		endpoint:  endpoint,
		key:       key,
		maxTokens: maxTokens,
		client:    httpx.NewClient(Name, cfg, s, key),
	}, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Generate sends req without streaming and returns the answer. Errors: see
// httpx.Client.Do; a request whose tool calls and results are not paired is
// refused before it is sent (llm.ErrBadRequest and llm.ErrUnpaired).
func (p *Provider) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	body, err := p.body(llm.MemoFrom(ctx), req, false)
	if err != nil {
		return llm.Response{}, err
	}
	var resp llm.Response
	err = p.client.Do(ctx, p.build(body, false), func(hr *http.Response) (bool, error) {
		r, err := decodeAnswer(hr.Body)
		resp = r
		return false, err
	})
	return resp, err
}

// Stream sends req with streaming and calls onDelta for each piece of text,
// thinking and tool input as it arrives. The Response is what Generate would
// return. A stream that breaks after a delta was delivered is not retried; the
// Response then holds what arrived.
func (p *Provider) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	body, err := p.body(llm.MemoFrom(ctx), req, true)
	if err != nil {
		return llm.Response{}, err
	}
	if onDelta == nil {
		onDelta = func(llm.Delta) {}
	}
	var resp llm.Response
	err = p.client.Do(ctx, p.build(body, true), func(hr *http.Response) (bool, error) {
		st := newStream(onDelta)
		err := st.read(hr.Body)
		resp = st.response()
		return st.delivered, err
	})
	return resp, err
}

func (p *Provider) build(body []byte, stream bool) func(context.Context) (*http.Request, error) {
	return func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("anthropic-version", Version)
		if stream {
			r.Header.Set("Accept", "text/event-stream")
		} else {
			r.Header.Set("Accept", "application/json")
		}
		if p.key != "" {
			r.Header.Set("x-api-key", p.key)
		}
		return r, nil
	}
}

// body encodes the request, after the checks a server would make. Its
// messages' blocks come from memo where the last request had the same
// messages (llm.Memo): the body is the one json.Marshal writes of the whole
// messagesRequest, byte for byte (TestBodyAsMarshal), made in time that
// grows with what changed rather than with the history.
func (p *Provider) body(memo *llm.Memo, req llm.Request, stream bool) ([]byte, error) {
	if err := llm.CheckPairing(req.Messages); err != nil {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: fmt.Errorf("%w: %w", llm.ErrBadRequest, err)}
	}
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: no model in the request or the configuration", Err: llm.ErrBadRequest}
	}
	blocks, err := memo.Encoded(Name, req.Messages, encodeBlocks)
	if err != nil {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
	}
	head := requestHead{Model: model, MaxTokens: req.Options.MaxTokens, System: systemOf(req.Messages)}
	if head.MaxTokens == 0 {
		head.MaxTokens = p.maxTokens
	}
	var tools []byte
	if len(req.Tools) > 0 {
		if tools, err = memo.EncodedTools(Name, req.Tools, encodeTools); err != nil {
			return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
		}
	}
	rest := requestRest{
		Stream:        stream,
		Temperature:   req.Options.Temperature,
		TopP:          req.Options.TopP,
		StopSequences: req.Options.Stop,
	}
	b, err := assemble(head, req.Messages, blocks, tools, rest)
	if err != nil {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
	}
	return b, nil
}

// encodeBlocks is m's blocks (blocksOf), each encoded, comma-separated.
func encodeBlocks(m llm.Message) ([]byte, error) {
	_, blocks := blocksOf(m)
	var out []byte
	for i, b := range blocks {
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return out, nil
}

// encodeTools is a request's tools, as its body lists them.
func encodeTools(ts []llm.ToolSchema) ([]byte, error) { return json.Marshal(toTools(ts)) }

// assemble writes messagesRequest's encoding from its parts: the fields
// before the messages, each message's blocks already encoded (grouped by
// role as toMessages groups them), the tools already encoded (none: left
// out), and the fields after.
func assemble(head requestHead, msgs []llm.Message, blocks [][]byte, tools []byte, rest requestRest) ([]byte, error) {
	h, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	n := len(h) + len(tools) + len(tail) + len(`,"messages":[],"tools":`)
	for _, b := range blocks {
		n += len(b) + len(`{"role":"assistant","content":[]},`)
	}
	out := make([]byte, 0, n)
	out = append(out, h[:len(h)-1]...)
	out = append(out, `,"messages":[`...)
	open := ""
	for i, m := range msgs {
		if len(blocks[i]) == 0 {
			continue
		}
		role := roleOf(m)
		if role != open {
			if open != "" {
				out = append(out, `]},`...)
			}
			out = append(out, `{"role":"`...)
			out = append(out, role...)
			out = append(out, `","content":[`...)
			open = role
		} else {
			out = append(out, ',')
		}
		out = append(out, blocks[i]...)
	}
	if open != "" {
		out = append(out, `]}`...)
	}
	out = append(out, ']')
	if len(tools) > 0 { // the first field of requestRest
		out = append(out, `,"tools":`...)
		out = append(out, tools...)
	}
	if len(tail) > 2 { // more than "{}"
		out = append(out, ',')
		out = append(out, tail[1:len(tail)-1]...)
	}
	return append(out, '}'), nil
}

// decodeAnswer reads a complete message.
func decodeAnswer(r io.Reader) (llm.Response, error) {
	b, err := io.ReadAll(io.LimitReader(r, httpx.MaxBody))
	if err != nil {
		return llm.Response{}, err
	}
	var v struct {
		messageAnswer
		Type  string    `json:"type"`
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && syn.Offset >= int64(len(b)) {
			return llm.Response{}, io.ErrUnexpectedEOF
		}
		return llm.Response{}, malformed(err)
	}
	if v.Type == "error" || v.Error != nil {
		if v.Error == nil {
			v.Error = &apiError{}
		}
		return llm.Response{}, v.Error.providerError()
	}
	resp := llm.Response{Model: v.Model, Usage: v.Usage.usage()}
	var text, thinking strings.Builder
	for _, bl := range v.Content {
		switch bl.Type {
		case "text":
			text.WriteString(bl.Text)
		case "thinking":
			thinking.WriteString(bl.Thinking)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: bl.ID, Name: bl.Name, Arguments: httpx.Arguments(string(bl.Input))})
		}
	}
	resp.Content, resp.Reasoning = text.String(), thinking.String()
	resp.FinishReason = finishReason(v.StopReason)
	return resp, nil
}

func malformed(err error) error {
	return &llm.ProviderError{Provider: Name, Message: "malformed answer: " + err.Error(), Err: llm.ErrUnavailable}
}
