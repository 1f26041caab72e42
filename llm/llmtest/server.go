package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is how an answer goes wrong after its pieces were sent.
type Fault int

// The faults.
const (
	// FaultNone: the answer completes.
	FaultNone Fault = iota
	// FaultError: the server reports an error (Answer.Message) in the stream.
	FaultError
	// FaultDrop: the server closes the connection without ending the answer.
	FaultDrop
	// FaultHang: the server sends nothing more until the client goes away.
	FaultHang
)

// Answer is what the fake model does for one request.
type Answer struct {
	// Status, when not 0 or 200, makes the server answer with this status, an
	// error body holding Message, and Retry-After when set.
	Status     int
	RetryAfter string
	Message    string

	Model     string
	Reasoning []string
	Text      []string
	Calls     []Call
	Usage     Usage
	Finish    string // "stop", "tool_calls", "length", "content_filter"; default by content

	// Fault happens after the pieces (reasoning, text, calls), instead of the end.
	Fault Fault

	// EchoKey makes the error (of Status, or of FaultError) repeat the
	// request's credentials after Message, as some OpenAI-compatible servers
	// do: the key by itself, and the Authorization and x-api-key headers as
	// a header line and as JSON.
	EchoKey bool
}

// echo is a's error message, with the credentials of r when a.EchoKey.
func (a Answer) echo(r *http.Request) string {
	if !a.EchoKey {
		return a.Message
	}
	auth, xkey := r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")
	key := strings.TrimPrefix(auth, "Bearer ")
	if xkey != "" {
		key = xkey
	}
	headers, _ := json.Marshal(map[string]string{"authorization": auth, "x-api-key": xkey})
	return fmt.Sprintf("%s: the key %s is not valid (Authorization: %s; X-Api-Key: %s; request headers %s)", a.Message, key, auth, xkey, headers)
}

// Call is a tool call whose arguments are sent in pieces.
type Call struct {
	ID, Name string
	Args     []string
}

// Usage is the token counts an answer reports.
type Usage struct {
	Input, Output, CacheRead int
}

func (a Answer) finish() string {
	switch {
	case a.Finish != "":
		return a.Finish
	case len(a.Calls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func (a Answer) model() string {
	if a.Model != "" {
		return a.Model
	}
	return "test-model"
}

// Encoder writes answers in a provider's wire format.
type Encoder interface {
	// Streaming reports whether a request body asks for a streamed answer.
	Streaming(body []byte) bool
	// ErrorBody is the JSON body of an error answer with status.
	ErrorBody(status int, message string) []byte
	// Body is the JSON body of a complete answer.
	Body(a Answer) []byte
	// Head, Pieces and Tail are the SSE events (each ending in a blank line) of a
	// streamed answer: before its content, one per piece of content, and after.
	Head(a Answer) []string
	Pieces(a Answer) []string
	Tail(a Answer) []string
	// ErrorEvent is an error reported in the middle of a stream.
	ErrorEvent(message string) string
}

// Request is a request the Server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server is a fake provider: it answers its requests, in order, with its
// answers, in its Encoder's format. A request beyond the answers fails the test.
type Server struct {
	URL string

	t       testing.TB
	enc     Encoder
	srv     *httptest.Server
	answers []Answer
	stop    chan struct{}
	gone    chan struct{}
	once    sync.Once

	mu       sync.Mutex
	requests []Request
}

// NewServer starts a Server, closed when the test ends.
func NewServer(t testing.TB, enc Encoder, answers ...Answer) *Server {
	s := &Server{t: t, enc: enc, answers: answers, stop: make(chan struct{}), gone: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.stop)
		s.srv.Close()
	})
	return s
}

// HTTPServer returns the underlying test server.
func (s *Server) HTTPServer() *httptest.Server { return s.srv }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count returns how many requests were received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Gone is closed once a client went away while the server held a stream open
// (FaultHang): the server saw the cancellation.
func (s *Server) Gone() <-chan struct{} { return s.gone }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if n >= len(s.answers) {
		s.t.Errorf("llmtest: unexpected request %d (the server has %d answers)", n+1, len(s.answers))
		s.error(w, http.StatusInternalServerError, "", "llmtest: unexpected request")
		return
	}
	a := s.answers[n]
	a.Message = a.echo(r)
	if a.Status != 0 && a.Status != http.StatusOK {
		s.error(w, a.Status, a.RetryAfter, a.Message)
		return
	}
	if !s.enc.Streaming(body) {
		s.complete(w, r, a)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	write := func(events []string) bool {
		for _, e := range events {
			if _, err := io.WriteString(w, e); err != nil {
				return false
			}
			w.(http.Flusher).Flush()
		}
		return true
	}
	if !write(s.enc.Head(a)) || !write(s.enc.Pieces(a)) {
		s.hang(r) // the client left: record it, as a hang would
		return
	}
	switch a.Fault {
	case FaultNone:
		write(s.enc.Tail(a))
	case FaultError:
		write([]string{s.enc.ErrorEvent(a.Message)})
	case FaultDrop:
		s.drop(w)
	case FaultHang:
		s.hang(r)
	}
}

// complete answers a non-streamed request.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	b := s.enc.Body(a)
	switch a.Fault {
	case FaultError:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(s.enc.ErrorBody(http.StatusInternalServerError, a.Message))
	case FaultDrop:
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		s.drop(w)
	case FaultHang:
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		s.hang(r)
	default:
		_, _ = w.Write(b)
	}
}

func (s *Server) error(w http.ResponseWriter, status int, retryAfter, message string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(s.enc.ErrorBody(status, message))
}

// drop closes the connection under the answer, as a crashed server or proxy does.
func (s *Server) drop(w http.ResponseWriter) {
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		s.t.Errorf("llmtest: hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// hang holds the answer open until the client goes away (or the test ends).
func (s *Server) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
		s.once.Do(func() { close(s.gone) })
	case <-s.stop:
	}
}

// Sleeper records the waits a provider asks for between retries, instead of
// waiting them; pass its Sleep to httpx.WithSleep.
type Sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

// Sleep records d and returns at once (ctx.Err() if ctx is done).
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

// Waits returns the recorded waits.
func (s *Sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}
