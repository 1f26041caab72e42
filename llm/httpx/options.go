package httpx

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// Settings are what the HTTP providers take beside their llm.Config: things that
// are not configuration but wiring (a client, a logger) or test hooks.
type Settings struct {
	// APIKey, when HasAPIKey, is used instead of reading the environment.
	APIKey    string
	HasAPIKey bool
	// HTTPClient sends the requests. Nil: a client of its own.
	HTTPClient *http.Client
	// Logger receives a line for each retry. Nil: nothing is logged.
	Logger *slog.Logger
	// Sleep waits between retries. Nil: a timer that a cancelled context stops.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the backoff's jitter. Nil: math/rand/v2.
	Rand func() float64
}

// Option changes Settings.
type Option func(*Settings)

// WithAPIKey sets the API key, instead of reading it from the environment variable
// the configuration names. The key is sent to the provider and nowhere else, and
// redacted from the provider's errors.
func WithAPIKey(key string) Option {
	return func(s *Settings) { s.APIKey, s.HasAPIKey = key, true }
}

// WithHTTPClient sends requests through c (a proxy, custom TLS, a test server's client).
func WithHTTPClient(c *http.Client) Option { return func(s *Settings) { s.HTTPClient = c } }

// WithLogger logs each retry to l (never a header, so never a key).
func WithLogger(l *slog.Logger) Option { return func(s *Settings) { s.Logger = l } }

// WithSleep replaces the wait between retries: tests record the backoffs that were
// asked for instead of waiting them.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Settings) { s.Sleep = f }
}

// WithRand replaces the source of the backoff's jitter (a number in [0, 1)).
func WithRand(f func() float64) Option { return func(s *Settings) { s.Rand = f } }

// Apply returns the Settings that opts make.
func Apply(opts []Option) Settings {
	var s Settings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// Key returns the API key: the one set with WithAPIKey, or the value of the
// environment variable env. ok is false when there is none.
func (s Settings) Key(env string) (key string, ok bool) {
	if s.HasAPIKey {
		return s.APIKey, s.APIKey != ""
	}
	key = os.Getenv(env)
	return key, key != ""
}

// Client returns the HTTP client to use: HTTPClient, or one of its own with a
// transport of its own (NewTransport) and no overall timeout (the per-attempt
// timeout is the Client's, so that it also bounds a streamed body). A provider
// calls it once: its calls share that transport's connections.
func (s Settings) Client() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	return &http.Client{Transport: NewTransport()}
}

// IdleConnsPerHost is how many idle connections to its server a provider's
// transport keeps: a node's LLM calls under way at once, at most, so that the
// connections of a busy moment serve the next one instead of being closed and
// dialed again (net/http's default keeps 2 per host: under load nearly every
// call dialed anew, with a TLS handshake against a real provider, and left a
// socket in TIME_WAIT). It is a ceiling, not an allocation: a connection is
// kept only if that many calls were once under way, and is closed after
// IdleConnTimeout unused.
const IdleConnsPerHost = 1024

// NewTransport returns the transport of a provider's own client: the default
// transport's behaviour (proxies from the environment, HTTP/2 where the server
// offers it over TLS, dial and TLS handshake timeouts, idle connections closed
// after 90 s) with room for IdleConnsPerHost idle connections to the provider.
// The connections under way are not limited (MaxConnsPerHost 0): a limit would
// queue the calls of a busy node in the transport, out of sight of its
// cancellations and timeouts; a provider's own limit answers 429, which Do
// retries. No response header timeout either: a complete (non-streamed) answer
// sends its headers only once the model has written it all, which the
// per-attempt timeout bounds.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          IdleConnsPerHost,
		MaxIdleConnsPerHost:   IdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
