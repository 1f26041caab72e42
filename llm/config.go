package llm

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// The providers a Config can name.
const (
	ProviderMock      = "mock"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Config selects and tunes a provider. It is plain data, meant to be embedded in the
// node's configuration; llm/providers.New builds the Provider it describes.
//
// Config never holds an API key: APIKeyEnv names the environment variable that does,
// so that a configuration file or a log of the configuration never reveals it.
//
// Zero values are literal, not defaults: a zero RequestTimeout means no timeout and a
// zero MaxRetries means no retry. Start from DefaultConfig and change what you need.
// The exceptions are BaseURL, APIKeyEnv and MaxTokens, whose zero value means "the
// provider's default".
type Config struct {
	// Provider is "mock", "openai" (OpenAI and every OpenAI-compatible server:
	// Ollama, vLLM, llama.cpp, ...) or "anthropic".
	Provider string `json:"provider"`
	// Model is the model to ask when a Request does not name one. Required for
	// "openai" and "anthropic".
	Model string `json:"model,omitempty"`
	// BaseURL is the API's root, e.g. "http://localhost:11434/v1" for Ollama. Empty:
	// the provider's public endpoint.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable that holds the API key. Empty:
	// OPENAI_API_KEY or ANTHROPIC_API_KEY.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// RequestTimeout bounds one HTTP attempt, from sending the request to the last
	// byte of a streamed answer. Zero: no timeout but the caller's context.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
	// MaxRetries is how many times a failed attempt is tried again (on 429, 5xx and
	// broken connections). Zero: never.
	MaxRetries int `json:"max_retries"`
	// BackoffBase is the first retry's backoff; each further retry doubles it, up to
	// BackoffMax. A Retry-After from the server takes precedence.
	BackoffBase time.Duration `json:"backoff_base,omitempty"`
	// BackoffMax caps one backoff. Zero: no cap.
	BackoffMax time.Duration `json:"backoff_max,omitempty"`
	// MaxTokens is the output token limit of a request that does not set its own.
	// Anthropic requires one (default 4096); OpenAI-compatible servers use theirs
	// when it is zero.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MockScript is the path of a mock script (JSON); empty runs the mock in demo
	// mode. Only for "mock".
	MockScript string `json:"mock_script,omitempty"`
	// MockPace is the mock's pause between two streamed tokens (a script may set
	// its own). Only for "mock".
	MockPace time.Duration `json:"mock_pace,omitempty"`
}

// DefaultConfig returns the configuration a node starts with: the mock in demo
// mode, and the timeouts and retries used for every real provider.
func DefaultConfig() Config {
	return Config{
		Provider:       ProviderMock,
		RequestTimeout: 10 * time.Minute,
		MaxRetries:     3,
		BackoffBase:    500 * time.Millisecond,
		BackoffMax:     30 * time.Second,
		MockPace:       15 * time.Millisecond,
	}
}

// ErrConfig is wrapped by every error of Config.Validate.
var ErrConfig = errors.New("invalid LLM configuration")

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports every setting of c that cannot work, each as "llm.<setting>: why",
// joined in one error that wraps ErrConfig. It never repeats the value of
// APIKeyEnv, in case a key was put there by mistake.
func (c Config) Validate() error {
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, fmt.Errorf("llm.%s: %s: %w", setting, fmt.Sprintf(format, args...), ErrConfig))
	}
	switch c.Provider {
	case ProviderMock:
	case ProviderOpenAI, ProviderAnthropic:
		if c.Model == "" {
			bad("model", "required for provider %q", c.Provider)
		}
		if c.MockScript != "" {
			bad("mock_script", "only for provider \"mock\", not %q", c.Provider)
		}
	case "":
		bad("provider", "required: one of mock, openai, anthropic")
	default:
		bad("provider", "%q is not one of mock, openai, anthropic", c.Provider)
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		switch {
		case err != nil:
			bad("base_url", "not a URL: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("base_url", "%q: want an http:// or https:// URL", c.BaseURL)
		case u.Host == "":
			bad("base_url", "%q has no host", c.BaseURL)
		case u.User != nil:
			bad("base_url", "must not carry credentials: use api_key_env")
		}
	}
	if c.APIKeyEnv != "" && !envName.MatchString(c.APIKeyEnv) {
		bad("api_key_env", "must name an environment variable (letters, digits, _), not hold the key itself")
	}
	if c.RequestTimeout < 0 {
		bad("request_timeout", "%v is negative", c.RequestTimeout)
	}
	if c.MaxRetries < 0 || c.MaxRetries > 100 {
		bad("max_retries", "%d is outside 0..100", c.MaxRetries)
	}
	if c.BackoffBase < 0 {
		bad("backoff_base", "%v is negative", c.BackoffBase)
	}
	if c.BackoffMax < 0 {
		bad("backoff_max", "%v is negative", c.BackoffMax)
	}
	if c.BackoffMax > 0 && c.BackoffBase > c.BackoffMax {
		bad("backoff_max", "%v is below backoff_base %v", c.BackoffMax, c.BackoffBase)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens", "%d is negative", c.MaxTokens)
	}
	if c.MockPace < 0 {
		bad("mock_pace", "%v is negative", c.MockPace)
	}
	return errors.Join(errs...)
}
