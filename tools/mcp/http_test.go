package mcp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/tools/mcp"
)

// serveHTTP serves an in-process Go SDK server with the tool hello on addr
// until the returned stop is called.
func serveHTTP(t *testing.T, addr string) (stop func()) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "web", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "hello", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("hello over http"), nil
		})
	var l net.Listener
	deadline := time.Now().Add(20 * time.Second)
	for { // the port of a server just stopped may take a moment to be free
		var err error
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hs := &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)}
	done := make(chan struct{})
	go func() { // stopped by stop
		defer close(done)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = hs.Close()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestHTTPServerGoneAndBack: a Streamable HTTP server that stops answering
// the pings has its tools withdrawn, and served again once it is back.
func TestHTTPServerGoneAndBack(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stop := serveHTTP(t, addr)
	b, nc := bridgedWith(t, mcp.Config{Servers: map[string]mcp.ServerConfig{"web": {URL: "http://" + addr + "/mcp"}}},
		mcp.Options{KeepAlive: 100 * time.Millisecond})
	waitServing(t, b, "web", true)
	// Pings every 100 ms may miss one on a loaded machine: the server is then
	// restarted, and a call meanwhile finds its tools withdrawn.
	callBack(t, nc, "web__hello", "c1")
	stop()
	waitServing(t, b, "web", false)
	serveHTTP(t, addr)
	waitServing(t, b, "web", true)
	callBack(t, nc, "web__hello", "c2")
}

// callBack calls name until it answers "hello over http".
func callBack(t *testing.T, nc *nats.Conn, name, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := request(nc, name, id, `{}`)
		if err == nil && strings.Contains(res.Output, "hello over http") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never answers: %+v %v", res, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
