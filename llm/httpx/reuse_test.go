package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

// waveServer is an httptest server speaking the streamed chat wire format
// (server-sent events ending with "data: [DONE]", as OpenAI-compatible
// servers send them): it answers no request until n are under way at once,
// so that a wave of n calls holds n connections at the same time, and it
// counts the connections the client dials (its ConnState hook).
type waveServer struct {
	*httptest.Server
	n int

	mu      sync.Mutex
	dialed  int
	arrived int
	release chan struct{} // closed once the wave's n requests arrived
}

func newWaveServer(t *testing.T, n int) *waveServer {
	t.Helper()
	w := &waveServer{n: n, release: make(chan struct{})}
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			w.mu.Lock()
			w.dialed++
			w.mu.Unlock()
		}
	}
	w.Start()
	t.Cleanup(w.Close)
	return w
}

func (w *waveServer) serve(rw http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.mu.Lock()
	release := w.release
	if w.arrived++; w.arrived == w.n {
		close(w.release)
		w.arrived, w.release = 0, make(chan struct{})
	}
	w.mu.Unlock()
	select {
	case <-release:
	case <-r.Context().Done():
		return
	}
	rw.Header().Set("Content-Type", "text/event-stream")
	fl := rw.(http.Flusher)
	for _, chunk := range []string{"Hel", "lo"} {
		fmt.Fprintf(rw, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", chunk)
		fl.Flush()
	}
	fmt.Fprint(rw, "data: [DONE]\n\n")
	fl.Flush()
	// The body ends when the handler returns, after [DONE]: the client stops
	// reading at [DONE], and net/http's transport reads the end of the body
	// for it when it closes the body, which lets the connection be reused.
}

func (w *waveServer) connections() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dialed
}

// streamed makes one streamed call the way the providers read one: events
// up to "data: [DONE]", and not a byte further.
func streamed(ctx context.Context, c *Client, url string) (string, error) {
	var text strings.Builder
	err := c.Do(ctx, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"stream":true}`))
	}, func(resp *http.Response) (bool, error) {
		sse := NewSSEReader(resp.Body)
		for {
			ev, err := sse.Next()
			if err != nil {
				return text.Len() > 0, err
			}
			if ev.Data == "[DONE]" {
				return text.Len() > 0, nil
			}
			i := strings.Index(ev.Data, `"content":"`)
			if i < 0 {
				return false, errors.New("no content in " + ev.Data)
			}
			rest := ev.Data[i+len(`"content":"`):]
			text.WriteString(rest[:strings.IndexByte(rest, '"')])
		}
	})
	return text.String(), err
}

// wave makes n streamed calls at once and waits for all of them, and for
// their connections to be back in the client's pool of idle ones: the
// transport puts a connection back on a goroutine of its own once it has
// read the end of the body, after the call returned, and a wave started
// before that would dial anew for want of them.
func wave(t *testing.T, c *Client, srv *waveServer, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // catches a hang only
	defer cancel()
	idle := make(chan struct{}, n)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{PutIdleConn: func(err error) {
		if err == nil {
			idle <- struct{}{}
		}
	}})
	defer func() {
		for range n {
			select {
			case <-idle:
			case <-ctx.Done():
				t.Fatalf("the calls' connections never came back to the pool: %v", ctx.Err())
			}
		}
	}()
	errs := make(chan error, n)
	for range n {
		go func() {
			text, err := streamed(ctx, c, srv.URL)
			if err == nil && text != "Hello" {
				err = fmt.Errorf("answer %q, want Hello", text)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("call: %v", err)
		}
	}
}

// A provider's client keeps the connections of calls made at once for the
// next calls: the second wave of n concurrent streamed calls dials no new
// connection. (With the default transport, which keeps 2 idle connections
// per host, it dialed n-2: nearly every call of a busy node dialed anew.)
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const n = 32
	srv := newWaveServer(t, n)
	c := NewClient("openai", llm.Config{MaxRetries: 0}, Settings{})
	wave(t, c, srv, n)
	first := srv.connections()
	if first != n {
		t.Fatalf("first wave dialed %d connections, want %d (one per call under way)", first, n)
	}
	wave(t, c, srv, n)
	if again := srv.connections() - first; again != 0 {
		t.Fatalf("second wave dialed %d new connections, want 0: the first wave's were not kept", again)
	}
}

// The transport of a provider's own client keeps what the default one has:
// proxies from the environment, HTTP/2 where the server offers it, timeouts
// on dialing and on the TLS handshake; and one is made per provider.
func TestProviderTransport(t *testing.T) {
	a, b := Settings{}.Client(), Settings{}.Client()
	ta, ok := a.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", a.Transport)
	}
	if a.Transport == b.Transport {
		t.Error("two providers share a transport")
	}
	if ta.Proxy == nil || !ta.ForceAttemptHTTP2 || ta.TLSHandshakeTimeout == 0 || ta.IdleConnTimeout == 0 || ta.DialContext == nil {
		t.Errorf("transport lacks a default: proxy %v, http2 %v, TLS handshake timeout %v, idle timeout %v",
			ta.Proxy != nil, ta.ForceAttemptHTTP2, ta.TLSHandshakeTimeout, ta.IdleConnTimeout)
	}
	if ta.MaxIdleConnsPerHost < IdleConnsPerHost || ta.MaxConnsPerHost != 0 {
		t.Errorf("idle per host %d, max per host %d", ta.MaxIdleConnsPerHost, ta.MaxConnsPerHost)
	}
	own := &http.Client{}
	if got := (Settings{HTTPClient: own}).Client(); got != own {
		t.Error("a client given with WithHTTPClient is not the one used")
	}
}
