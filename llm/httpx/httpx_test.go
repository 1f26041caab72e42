package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

func readAll(t *testing.T, in string) ([]Event, error) {
	t.Helper()
	r := NewSSEReader(strings.NewReader(in))
	defer r.Close()
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
		err  error
	}{
		{"data only", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []Event{{Data: `{"a":1}`}, {Data: "[DONE]"}}, nil},
		{"typed", "event: ping\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			[]Event{{Type: "ping", Data: "{}"}, {Type: "message_stop", Data: `{"type":"message_stop"}`}}, nil},
		{"crlf", "event: a\r\ndata: x\r\n\r\n", []Event{{Type: "a", Data: "x"}}, nil},
		{"multi-line data", "data: one\ndata: two\n\n", []Event{{Data: "one\ntwo"}}, nil},
		{"no space after colon", "data:x\n\n", []Event{{Data: "x"}}, nil},
		{"comments and unknown fields", ": keep-alive\nretry: 10\nfoo: bar\nid: 7\ndata: x\n\n", []Event{{Data: "x", ID: "7"}}, nil},
		{"event without data is not dispatched", "event: a\n\ndata: b\n\n", []Event{{Data: "b"}}, nil},
		{"empty", "", nil, nil},
		{"cut inside an event", "data: {\"a\":1}\n\ndata: {\"b\"", []Event{{Data: `{"a":1}`}}, io.ErrUnexpectedEOF},
		{"cut before the blank line", "data: x\n", nil, io.ErrUnexpectedEOF},
		{"trailing blank lines", "data: x\n\n\n\n", []Event{{Data: "x"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, tt.in)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // beyond the reader's buffer
	got, err := readAll(t, "data: "+long+"\n\n")
	if err != nil || len(got) != 1 || got[0].Data != long {
		t.Fatalf("long line: %d events, err %v", len(got), err)
	}
	_, err = readAll(t, "data: "+strings.Repeat("x", MaxEventLine+1)+"\n\n")
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("over-long line: error = %v, want ErrLineTooLong", err)
	}
}

// TestSSEReaderClosed: a closed reader's buffer serves the next ones (from
// many goroutines at once), none sees another's bytes, and the closed one
// reads nothing more.
func TestSSEReaderClosed(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("y", i*1500)) // some beyond a buffer
				r := NewSSEReader(strings.NewReader("data: " + want + "\n\n"))
				ev, err := r.Next()
				if err != nil || ev.Data != want {
					errs <- fmt.Errorf("reader %d/%d: %q, %v", g, i, ev.Data[:min(len(ev.Data), 20)], err)
					return
				}
				r.Close()
				if _, err := r.Next(); !errors.Is(err, io.EOF) {
					errs <- fmt.Errorf("a closed reader: %v, want io.EOF", err)
					return
				}
				r.Close() // twice: nothing
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{"fraction", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"milliseconds header wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
		{"absent", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := RetryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RetryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	low := Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Rand: func() float64 { return 0 }}
	high := low
	high.Rand = func() float64 { return 0.999999 }
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		want *= time.Millisecond
		lo, ok := low.Backoff(attempt, 0, false)
		hi, _ := high.Backoff(attempt, 0, false)
		if !ok || lo != want/2 || hi > want || hi < want*99/100 {
			t.Errorf("attempt %d: backoff in [%v, %v], want [%v, %v]", attempt, lo, hi, want/2, want)
		}
	}
	if d, ok := low.Backoff(1000, 0, false); !ok || d != 500*time.Millisecond {
		t.Errorf("a huge attempt number: %v, %v", d, ok)
	}
	if d, ok := low.Backoff(0, 3*time.Second, true); !ok || d != 3*time.Second {
		t.Errorf("Retry-After 3s: %v, %v; want 3s, true", d, ok)
	}
	if _, ok := low.Backoff(0, DefaultMaxRetryAfter+time.Second, true); ok {
		t.Error("a Retry-After beyond the limit was accepted")
	}
	if d, ok := (Policy{}).Backoff(3, 0, false); !ok || d != 0 {
		t.Errorf("no base delay: %v, %v", d, ok)
	}
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
}

func TestErrorMessage(t *testing.T) {
	tests := map[string]string{
		`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`: "Incorrect API key provided",
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`:       "Overloaded",
		`{"error":"model 'llama9' not found"}`:                                              "model 'llama9' not found",
		`{"message":"bad gateway"}`:                                                         "bad gateway",
		`{"detail":"Not Found"}`:                                                            "Not Found",
		"<html>\n<b>502</b> Bad Gateway\n</html>":                                           "<html> <b>502</b> Bad Gateway </html>",
		"": "",
	}
	for body, want := range tests {
		if got := ErrorMessage([]byte(body)); got != want {
			t.Errorf("ErrorMessage(%q) = %q, want %q", body, got, want)
		}
	}
	if got := ErrorMessage(bytes.Repeat([]byte("x"), 2000)); len([]rune(got)) != 501 {
		t.Errorf("a long body gives %d characters, want 500 and an ellipsis", len([]rune(got)))
	}
}

func TestArguments(t *testing.T) {
	for in, want := range map[string]string{
		`{"path":"."}`: `{"path":"."}`,
		"":             `{}`,
		"  ":           `{}`,
		`{"path":`:     `"{\"path\":"`,
	} {
		got := Arguments(in)
		if string(got) != want {
			t.Errorf("Arguments(%q) = %s, want %s", in, got, want)
		}
		if back := ArgumentsText(got); strings.TrimSpace(in) != "" && back != in {
			t.Errorf("ArgumentsText(Arguments(%q)) = %q", in, back)
		}
	}
}

// client returns a Client for srv that records its waits.
func client(srv *httptest.Server, retries int, waits *[]time.Duration) *Client {
	return &Client{
		Provider: "test",
		HTTP:     srv.Client(),
		Retry: Policy{MaxRetries: retries, BaseDelay: time.Millisecond, Sleep: func(ctx context.Context, d time.Duration) error {
			*waits = append(*waits, d)
			return nil
		}},
	}
}

func get(url string) func(context.Context) (*http.Request, error) {
	return func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	}
}

func readBody(resp *http.Response) (bool, error) {
	_, err := io.ReadAll(resp.Body)
	return false, err
}

func TestRetryAfterBeyondLimitNotRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "3600")
		http.Error(w, `{"error":{"message":"quota exceeded"}}`, http.StatusTooManyRequests)
	}))
	defer srv.Close()
	var waits []time.Duration
	err := client(srv, 3, &waits).Do(context.Background(), get(srv.URL), readBody)
	if !errors.Is(err, llm.ErrRateLimited) || n.Load() != 1 || len(waits) != 0 {
		t.Fatalf("err %v after %d requests and waits %v; want ErrRateLimited after 1, no wait", err, n.Load(), waits)
	}
	if !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("error %q lacks the server's message", err)
	}
}

func TestErrorBodyCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		for range 1000 { // 16 MB: far beyond MaxErrorBody
			_, _ = w.Write(bytes.Repeat([]byte("x"), 16<<10))
		}
	}))
	defer srv.Close()
	var waits []time.Duration
	err := client(srv, 0, &waits).Do(context.Background(), get(srv.URL), readBody)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 400 || len(pe.Message) > 600 {
		t.Fatalf("err = %v", err)
	}
}

func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	var waits []time.Duration
	c := client(srv, 1, &waits)
	c.Timeout = 20 * time.Millisecond
	err := c.Do(context.Background(), get(srv.URL), readBody)
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "request timeout") {
		t.Fatalf("err = %v, want a timeout wrapping ErrUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a per-attempt timeout must not look like the caller's deadline: %v", err)
	}
	if len(waits) != 1 {
		t.Errorf("waits = %v, want one retry", waits)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{Provider: "test", HTTP: srv.Client(), Retry: Policy{MaxRetries: 5, BaseDelay: time.Hour,
		Sleep: func(ctx context.Context, d time.Duration) error {
			cancel() // the caller gives up while we wait
			return Sleep(ctx, d)
		}}}
	err := c.Do(ctx, get(srv.URL), readBody)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRetryLogNamesNoHeader(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var logs bytes.Buffer
	var waits []time.Duration
	c := client(srv, 2, &waits)
	c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	err := c.Do(context.Background(), func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err == nil {
			r.Header.Set("Authorization", "Bearer sk-secret")
		}
		return r, err
	}, readBody)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "retrying") || strings.Contains(logs.String(), "sk-secret") {
		t.Errorf("log = %q: want a retry line without the key", logs.String())
	}
}
