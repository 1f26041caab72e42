package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/llm"
)

// Size limits of what is read from a provider.
const (
	// MaxErrorBody is how much of an error answer's body is read.
	MaxErrorBody = 64 << 10
	// MaxBody is how much of a complete (non-streamed) answer is read.
	MaxBody = 32 << 20
)

// Client sends one logical request to a provider, with retries.
type Client struct {
	// Provider names the provider in errors and logs.
	Provider string
	HTTP     *http.Client
	// Timeout bounds one attempt, the whole streamed body included. Zero: none.
	Timeout time.Duration
	Retry   Policy
	// Logger receives a line per retry; nil: none.
	Logger *slog.Logger
	// ErrorMessage extracts the provider's message from an error body. Nil:
	// ErrorMessage (this package's function).
	ErrorMessage func(body []byte) string
	// Secrets are redacted from every error Do returns or logs (llm.Redact):
	// the API key, which some servers repeat in their error answers.
	Secrets []string
}

// ReadFunc reads a successful (2xx) answer. It reports whether anything of the
// answer reached the caller (a streamed delta): after that, a failure is not
// retried. An error that is not a *llm.ProviderError is taken for a broken
// connection.
type ReadFunc func(resp *http.Response) (delivered bool, err error)

// Do sends the request that build makes (once per attempt, with the attempt's
// context) and hands a 2xx answer to read. It retries as the package doc says.
//
// The error is a *llm.ProviderError: with Err llm.ErrRateLimited, ErrUnavailable or
// ErrBadRequest for what the provider answered or a broken connection, or with Err
// ctx.Err() when ctx was cancelled (so errors.Is(err, context.Canceled) holds).
// Its message is redacted (llm.Redact with Secrets): what a server wrote back,
// an echoed Authorization or x-api-key header included, never carries a key on.
func (c *Client) Do(ctx context.Context, build func(ctx context.Context) (*http.Request, error), read ReadFunc) error {
	for attempt := 0; ; attempt++ {
		delivered, retryAfter, hasRetryAfter, err := c.once(ctx, build, read)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return c.cancelled(ctx)
		}
		if !Retryable(err) {
			return err
		}
		if delivered {
			var pe *llm.ProviderError
			if errors.As(err, &pe) {
				pe.Message += " (part of the answer was already streamed: not retried)"
			}
			return err
		}
		if attempt >= c.Retry.MaxRetries {
			return err
		}
		wait, ok := c.Retry.Backoff(attempt, retryAfter, hasRetryAfter)
		if !ok {
			return err
		}
		if c.Logger != nil {
			c.Logger.LogAttrs(ctx, slog.LevelWarn, "llm: retrying",
				slog.String("provider", c.Provider),
				slog.Int("retry", attempt+1),
				slog.Int("max_retries", c.Retry.MaxRetries),
				slog.Duration("wait", wait),
				slog.String("error", err.Error()))
		}
		// The caller's span (a turn's chat span) shows each retry where it
		// happened; a no-op when the context holds no recording span.
		trace.SpanFromContext(ctx).AddEvent("retry", trace.WithAttributes(
			attribute.Int("tah.retry", attempt+1), attribute.Int64("tah.retry.wait_ms", wait.Milliseconds()),
			attribute.String("error.type", retryKind(err))))
		if err := c.Retry.sleep(ctx, wait); err != nil {
			return c.cancelled(ctx)
		}
	}
}

// retryKind names the kind of err for a span (error.type): never its
// message, which may quote what the provider wrote back.
func retryKind(err error) string {
	switch {
	case errors.Is(err, llm.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, llm.ErrUnavailable):
		return "unavailable"
	default:
		return "connection"
	}
}

// Retryable reports whether err is worth another attempt: the provider was rate
// limited or unavailable, or the connection broke.
func Retryable(err error) bool {
	return errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrUnavailable)
}

func (c *Client) once(ctx context.Context, build func(context.Context) (*http.Request, error), read ReadFunc) (delivered bool, retryAfter time.Duration, hasRetryAfter bool, err error) {
	// Every error of an attempt, whatever made it (an error body, an error
	// event of a stream, a failed connection's URL), is redacted here, before
	// Do logs or returns it.
	defer func() { err = llm.RedactError(err, c.Secrets...) }()
	actx, cancel := context.WithCancel(ctx)
	if c.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	defer cancel()
	req, err := build(actx)
	if err != nil {
		return false, 0, false, &llm.ProviderError{Provider: c.Provider, Message: "building the request: " + err.Error(), Err: err}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return false, 0, false, c.broken(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		parse := c.ErrorMessage
		if parse == nil {
			parse = ErrorMessage
		}
		// Redacted before it is parsed and cut: a key cut in two by the
		// cut would no longer be found whole.
		msg := parse([]byte(llm.Redact(string(body), c.Secrets...)))
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		retryAfter, hasRetryAfter = RetryAfter(resp.Header, time.Now())
		return false, retryAfter, hasRetryAfter, &llm.ProviderError{
			Provider: c.Provider, Status: resp.StatusCode, Message: msg, Err: StatusError(resp.StatusCode),
		}
	}
	delivered, err = read(resp)
	if err == nil {
		drainRest(resp.Body, cancel)
	}
	if err != nil {
		var pe *llm.ProviderError
		if !errors.As(err, &pe) {
			err = c.broken(actx, err)
		}
	}
	return delivered, 0, false, err
}

// What is read of a body after its reader stopped (drainRest).
const (
	drainMax  = 4 << 10
	drainWait = 250 * time.Millisecond
)

// drainRest reads the end of a body whose reader stopped before it (a
// stream read up to its "data: [DONE]" event), so that the transport puts
// the connection back among the idle ones for the next call: a body closed
// before its end closes its connection, and whether the end (the chunked
// encoding's last chunk, sent right after the event) had arrived by then was
// a matter of timing. At most drainMax bytes and drainWait, after which
// cancel ends the request (and the connection) as before: a server that
// keeps a stream open after its last event costs that wait once per call.
func drainRest(body io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
}

// broken describes a failed or broken connection.
func (c *Client) broken(actx context.Context, err error) error {
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &llm.ProviderError{Provider: c.Provider,
			Message: fmt.Sprintf("no complete answer within the request timeout (%v)", c.Timeout), Err: llm.ErrUnavailable}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &llm.ProviderError{Provider: c.Provider, Message: "the connection closed before the answer was complete", Err: llm.ErrUnavailable}
	}
	return &llm.ProviderError{Provider: c.Provider, Message: "connection failed: " + err.Error(), Err: llm.ErrUnavailable}
}

func (c *Client) cancelled(ctx context.Context) error {
	return &llm.ProviderError{Provider: c.Provider, Message: "request cancelled: " + ctx.Err().Error(), Err: ctx.Err()}
}

// StatusError is the sentinel for an HTTP status that is not a success: 429 is
// llm.ErrRateLimited, 5xx llm.ErrUnavailable, anything else llm.ErrBadRequest.
func StatusError(status int) error {
	switch {
	case status == http.StatusTooManyRequests:
		return llm.ErrRateLimited
	case status >= 500:
		return llm.ErrUnavailable
	default:
		return llm.ErrBadRequest
	}
}

// ErrorMessage extracts the message of a JSON error body in the usual shapes:
// {"error":{"message":...}} (OpenAI, Anthropic, vLLM), {"error":"..."} (Ollama,
// llama.cpp), {"message":...} and {"detail":...}. Anything else is returned as
// text, trimmed and cut to 500 characters.
func ErrorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		if len(v.Error) > 0 {
			var e struct {
				Message string `json:"message"`
			}
			var s string
			if json.Unmarshal(v.Error, &e) == nil && e.Message != "" {
				return e.Message
			}
			if json.Unmarshal(v.Error, &s) == nil && s != "" {
				return s
			}
		}
		if v.Message != "" {
			return v.Message
		}
		var s string
		if len(v.Detail) > 0 && json.Unmarshal(v.Detail, &s) == nil && s != "" {
			return s
		}
	}
	return Clip(string(body), 500)
}

// Clip trims s, drops control characters and cuts it to n characters.
func Clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// NewClient returns the Client for provider that cfg and s describe; secrets
// (the API key) are redacted from its errors.
func NewClient(provider string, cfg llm.Config, s Settings, secrets ...string) *Client {
	return &Client{
		Provider: provider,
		Secrets:  secrets,
		HTTP:     s.Client(),
		Timeout:  cfg.RequestTimeout,
		Logger:   s.Logger,
		Retry: Policy{
			MaxRetries: cfg.MaxRetries,
			BaseDelay:  cfg.BackoffBase,
			MaxDelay:   cfg.BackoffMax,
			Sleep:      s.Sleep,
			Rand:       s.Rand,
		},
	}
}

// Endpoint joins a base URL and a path, with exactly one slash between them.
func Endpoint(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// Arguments returns a tool call's arguments as valid JSON for llm.ToolCall: the
// text itself when it is valid JSON, "{}" when it is empty, and otherwise the text
// as a JSON string, so that a malformed value the model wrote is kept (the tool
// runner reports it to the model) and the response still serialises.
func Arguments(text string) json.RawMessage {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(text)
	return b
}

// ArgumentsText is the inverse of Arguments, for sending a recorded call back to a
// provider: a JSON string is unwrapped, empty becomes "{}".
func ArgumentsText(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return "{}"
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return t
}
