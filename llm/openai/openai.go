package openai

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
	Name             = llm.ProviderOpenAI
	DefaultBaseURL   = "https://api.openai.com/v1"
	DefaultAPIKeyEnv = "OPENAI_API_KEY"
)

// Provider talks to an OpenAI-compatible Chat Completions endpoint. It is safe for
// concurrent use.
type Provider struct {
	model          string
	endpoint       string
	key            string
	maxTokens      int
	completionsCap bool // send max_completion_tokens rather than max_tokens
	client         *httpx.Client
}

var _ llm.Streamer = (*Provider)(nil)

// New returns the provider that cfg describes (cfg.Provider must be "openai" or
// empty). The API key is read now, from the variable cfg.APIKeyEnv names
// (default OPENAI_API_KEY) or from httpx.WithAPIKey. It is required only for the
// default base URL: local servers usually need none.
//
// The error wraps llm.ErrConfig.
func New(cfg llm.Config, opts ...httpx.Option) (*Provider, error) {
	if cfg.Provider != "" && cfg.Provider != Name {
		return nil, fmt.Errorf("openai: the configuration is for provider %q: %w", cfg.Provider, llm.ErrConfig)
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
	u, _ := url.Parse(base)
	official := u != nil && u.Hostname() == "api.openai.com"
	if !ok && official {
		return nil, fmt.Errorf("openai: no API key: set the environment variable %s (or set llm.base_url to a local server, which needs none): %w", env, llm.ErrConfig)
	}
	return &Provider{
		model:          cfg.Model,
		endpoint:       httpx.Endpoint(base, "chat/completions"),
		key:            key,
		maxTokens:      cfg.MaxTokens,
		completionsCap: official,
		client:         httpx.NewClient(Name, cfg, s, key),
	}, nil
}

// Name returns "openai".
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
// reasoning and tool call as it arrives. The Response is what Generate would
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
		if stream {
			r.Header.Set("Accept", "text/event-stream")
		} else {
			r.Header.Set("Accept", "application/json")
		}
		if p.key != "" {
			r.Header.Set("Authorization", "Bearer "+p.key)
		}
		return r, nil
	}
}

// body encodes the request, after the checks a server would make. Its
// messages' encodings come from memo where the last request had the same
// ones (llm.Memo): the body is the one json.Marshal writes of the whole
// chatRequest, byte for byte (TestBodyAsMarshal), made in time that grows
// with what changed rather than with the history.
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
	msgs, err := memo.Encoded(Name, req.Messages, encodeMessage)
	if err != nil {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
	}
	var tools []byte
	if len(req.Tools) > 0 {
		if tools, err = memo.EncodedTools(Name, req.Tools, encodeTools); err != nil {
			return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
		}
	}
	rest := requestRest{
		Stream:      stream,
		Temperature: req.Options.Temperature,
		TopP:        req.Options.TopP,
		Stop:        req.Options.Stop,
	}
	if stream {
		rest.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	maxTokens := req.Options.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if p.completionsCap {
		rest.MaxCompletionTokens = maxTokens
	} else {
		rest.MaxTokens = maxTokens
	}
	b, err := assemble(model, msgs, tools, rest)
	if err != nil {
		return nil, &llm.ProviderError{Provider: Name, Message: "not sent: " + err.Error(), Err: llm.ErrBadRequest}
	}
	return b, nil
}

// encodeMessage is one message of a request's body.
func encodeMessage(m llm.Message) ([]byte, error) { return json.Marshal(toMessage(m)) }

// encodeTools is a request's tools, as its body lists them.
func encodeTools(ts []llm.ToolSchema) ([]byte, error) { return json.Marshal(toTools(ts)) }

// assemble writes chatRequest's encoding from its parts: the model, the
// messages and the tools already encoded (none: left out), and the fields
// after them.
func assemble(model string, msgs [][]byte, tools []byte, rest requestRest) ([]byte, error) {
	head, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	n := len(`{"model":,"messages":[],"tools":}`) + len(head) + len(tools) + len(tail) + len(msgs)
	for _, m := range msgs {
		n += len(m)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"model":`...)
	b = append(b, head...)
	b = append(b, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	b = append(b, ']')
	if len(tools) > 0 { // the first field of requestRest
		b = append(b, `,"tools":`...)
		b = append(b, tools...)
	}
	if len(tail) > 2 { // more than "{}"
		b = append(b, ',')
		b = append(b, tail[1:len(tail)-1]...)
	}
	return append(b, '}'), nil
}

// decodeAnswer reads a complete chat.completion.
func decodeAnswer(r io.Reader) (llm.Response, error) {
	b, err := io.ReadAll(io.LimitReader(r, httpx.MaxBody))
	if err != nil {
		return llm.Response{}, err
	}
	var cr chatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && syn.Offset >= int64(len(b)) {
			return llm.Response{}, io.ErrUnexpectedEOF // cut short
		}
		return llm.Response{}, malformed(err)
	}
	if cr.Error != nil {
		return llm.Response{}, cr.Error.providerError()
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message == nil {
		return llm.Response{}, &llm.ProviderError{Provider: Name, Message: "the answer has no choices", Err: llm.ErrUnavailable}
	}
	c := cr.Choices[0]
	m := c.Message
	resp := llm.Response{Model: cr.Model, Reasoning: m.reasoning(), Usage: cr.Usage.usage()}
	if m.Content != nil {
		resp.Content = *m.Content
	}
	for i, tc := range m.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{
			ID: callID(tc.ID, i), Name: tc.Function.Name, Arguments: httpx.Arguments(tc.Function.Arguments),
		})
	}
	finish := ""
	if c.FinishReason != nil {
		finish = *c.FinishReason
	}
	resp.FinishReason = finishReason(finish, len(resp.ToolCalls) > 0)
	return resp, nil
}

func malformed(err error) error {
	return &llm.ProviderError{Provider: Name, Message: "malformed answer: " + err.Error(), Err: llm.ErrUnavailable}
}

// callID is the call's id, or one made up for servers that send none.
func callID(id string, i int) string {
	if strings.TrimSpace(id) != "" {
		return id
	}
	return fmt.Sprintf("call_%d", i)
}
