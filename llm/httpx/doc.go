// Package httpx is the transport shared by the HTTP providers (llm/openai,
// llm/anthropic): one request with retries, a per-attempt timeout and cancellation;
// a reader of server-sent events; the parsing of Retry-After and of JSON error bodies.
//
// The providers are written on net/http rather than on the vendors' SDKs so that
// the retry rules are the same for both and exactly as TAH documents them:
//
//   - a cancelled context aborts the request at once, also while waiting to retry,
//     and the error wraps ctx.Err();
//   - 429, 5xx, a connection that fails or breaks, and a provider's "overloaded" or
//     "rate limited" error event are retried with exponential backoff and jitter,
//     or after the server's Retry-After (seconds, HTTP date, or retry-after-ms);
//     other 4xx answers are never retried;
//   - a streamed answer is retried only while nothing of it has reached the caller:
//     once a delta was delivered, a broken stream is returned as an error wrapping
//     llm.ErrUnavailable, never silently restarted (the caller would see the answer
//     twice);
//   - error bodies are read up to MaxErrorBody bytes; the provider's own message is
//     kept in the *llm.ProviderError;
//   - headers (and so API keys) are never logged, and every error is redacted
//     (llm.Redact with the Client's Secrets, the API key) before it is returned or
//     logged: some servers repeat the request's Authorization in their errors;
//   - a provider's own HTTP client (Settings.Client) has a transport of its own
//     that keeps as many idle connections to the provider as a node has calls
//     under way (NewTransport), so that calls reuse connections rather than
//     dial (and handshake TLS) anew.
//
// The smallest use, inside a provider:
//
//	c := &httpx.Client{Provider: "openai", HTTP: http.DefaultClient, Retry: httpx.Policy{MaxRetries: 3}}
//	err := c.Do(ctx, func(ctx context.Context) (*http.Request, error) {
//		return http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
//	}, func(resp *http.Response) (delivered bool, err error) {
//		return false, json.NewDecoder(resp.Body).Decode(&out)
//	})
package httpx
