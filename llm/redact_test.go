package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The shapes in which servers and libraries repeat a credential: each loses
// its secret, and keeps the text around it.
func TestRedact(t *testing.T) {
	const key = "k3y-0f-the-t3st+/=" // no known shape: only the configured key finds it
	for _, c := range []struct {
		in, want string
	}{
		{"Incorrect API key provided: " + key + ".", "Incorrect API key provided: [REDACTED]."},
		{`{"error":"bad key \"` + key + `\""}`, `{"error":"bad key \"[REDACTED]\""}`},
		{"key k3y-0f-the-t3st%2B%2F%3D in a URL", "key [REDACTED] in a URL"},
		{"Authorization: Bearer abc.def-123", "Authorization: Bearer [REDACTED]"},
		{"authorization:bearer abc", "authorization:bearer [REDACTED]"},
		{`{"headers":{"authorization":"Bearer abc","accept":"*/*"}}`, `{"headers":{"authorization":"Bearer [REDACTED]","accept":"*/*"}}`},
		{`{"Authorization": ["Bearer abc"]}`, `{"Authorization": ["Bearer [REDACTED]"]}`},
		{`msg {\"x-api-key\":\"abc\"} end`, `msg {\"x-api-key\":\"[REDACTED]\"} end`},
		{"map[Authorization:[Bearer abc] X-Api-Key:[def] Accept:[x]]", "map[Authorization:[Bearer [REDACTED]] X-Api-Key:[[REDACTED]] Accept:[x]]"},
		{"x-api-key: abc, anthropic-version: 2023-06-01", "x-api-key: [REDACTED], anthropic-version: 2023-06-01"},
		{"Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic [REDACTED]"},
		{"api-key: abc", "api-key: [REDACTED]"},
		{"GET /v1/models?api_key=abc&x=1", "GET /v1/models?api_key=[REDACTED]&x=1"},
		{"apikey='abc'", "apikey='[REDACTED]'"},
		{"access_token=abc", "access_token=[REDACTED]"},
		{`Post "https://g.example/v1/m?alt=sse&key=abc": EOF`, `Post "https://g.example/v1/m?alt=sse&key=[REDACTED]": EOF`},
		{"the key=value pairs", "the key=value pairs"},
		{"your key sk-proj-AbCdEf0123456789xyz is revoked", "your key [REDACTED] is revoked"},
		{"key sk-ant-api03-AbC_dEf-0123456789 bad", "key [REDACTED] bad"},
		// No secret: as it was.
		{"Authorization header is missing", "Authorization header is missing"},
		{"Authorization: Bearer", "Authorization: Bearer"},
		{"max_tokens: 4096 is too large for task-scheduler", "max_tokens: 4096 is too large for task-scheduler"},
		{"sk-short", "sk-short"},
	} {
		got := Redact(c.in, key)
		if got != c.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if again := Redact(got, key); again != got {
			t.Errorf("redacting %q again gave %q", got, again)
		}
	}
}

// A configured key shorter than MinSecretLen is not searched for by itself
// (it would blank ordinary words); in a credential's place it still goes.
func TestRedactShortKey(t *testing.T) {
	if got := Redact("a test of x-api-key: test", "test"); got != "a test of x-api-key: [REDACTED]" {
		t.Fatalf("%q", got)
	}
}

// RedactError keeps what callers decide on: the provider error's status, its
// sentinel, a cancel.
func TestRedactErrorKeepsTheClass(t *testing.T) {
	const key = "the-configured-key"
	pe := &ProviderError{Provider: "openai", Status: 401, Message: "bad key " + key, Err: ErrBadRequest}
	err := RedactError(pe, key)
	var got *ProviderError
	if !errors.As(err, &got) || got.Status != 401 || got.Provider != "openai" || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("the class is lost: %#v", err)
	}
	if err.Error() != "openai: HTTP 401: bad key [REDACTED]" {
		t.Fatalf("%q", err.Error())
	}
	if pe.Message != "bad key "+key {
		t.Fatal("the original was changed")
	}

	wrapped := fmt.Errorf("calling: %w: %w", context.Canceled, errors.New("Authorization: Bearer abc"))
	err = RedactError(wrapped)
	if err.Error() != "calling: context canceled: Authorization: Bearer [REDACTED]" || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	plain := errors.New("nothing secret")
	if RedactError(plain) != plain || RedactError(nil) != nil {
		t.Fatal("an error without a secret is returned as it is")
	}
	if strings.Contains(RedactError(&ProviderError{Provider: "x", Message: key}, key).Error(), key) {
		t.Fatal("leak")
	}
}
