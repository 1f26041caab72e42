package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

const testKey = "Zq8v0Lk3Wm2Nx7Rb5Tc1"

// A text error body is cut to 500 characters; a key that the cut splits
// would no longer be found whole, and its first part would leak. The body is
// redacted before it is cut.
func TestErrorBodyRedactedBeforeItIsCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, strings.Repeat("x", 485)+" "+r.Header.Get("X-Api-Key")+" is not a valid key")
	}))
	defer srv.Close()
	var waits []time.Duration
	c := client(srv, 0, &waits)
	c.Secrets = []string{testKey}
	err := c.Do(context.Background(), func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err == nil {
			r.Header.Set("X-Api-Key", testKey)
		}
		return r, err
	}, readBody)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || !errors.Is(err, llm.ErrBadRequest) {
		t.Fatalf("err = %v, want a 401 refused", err)
	}
	if strings.Contains(err.Error(), testKey[:6]) || !strings.Contains(err.Error(), llm.Redacted) {
		t.Fatalf("err = %q: the key, or a part of it, is there", err)
	}
}

// A connection that fails names its URL: a key in its query string (as some
// gateways take it) is redacted, by itself and as api_key=.
func TestConnectionErrorRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	var waits []time.Duration
	c := client(srv, 0, &waits)
	c.Secrets = []string{testKey}
	for _, u := range []string{url + "/v1/chat?key=" + testKey, url + "/v1/chat?api_key=sk-other-0123456789abcdef"} {
		err := c.Do(context.Background(), get(u), readBody)
		if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "connection failed") {
			t.Fatalf("err = %v, want a failed connection", err)
		}
		if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "sk-other") || !strings.Contains(err.Error(), llm.Redacted) {
			t.Fatalf("err = %q: a key is there", err)
		}
	}
}
