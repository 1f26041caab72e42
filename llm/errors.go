package llm

import (
	"errors"
	"fmt"
)

// Errors that providers return, wrapped in a *ProviderError or with %w.
var (
	// ErrRateLimited: the provider answered 429 and retries were used up.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: the provider answered 5xx, or the connection broke, and retries
	// were used up.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrBadRequest: the provider refused the request (4xx other than 429); retrying
	// the same request cannot help.
	ErrBadRequest = errors.New("request refused by provider")
	// ErrUnpaired: a conversation in which a tool call has no result, or a result has
	// no call. Providers refuse such a request.
	ErrUnpaired = errors.New("tool calls and tool results are not paired")
)

// ProviderError is a failure reported by, or on the way to, a provider.
type ProviderError struct {
	Provider string // "openai", "anthropic", "mock", ...
	Status   int    // HTTP status, 0 when there was none
	Message  string // the provider's own message, or what went wrong on the way
	Err      error  // one of the sentinels above, or the underlying error
}

func (e *ProviderError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

func (e *ProviderError) Unwrap() error { return e.Err }
