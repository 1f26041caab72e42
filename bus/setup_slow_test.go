package bus

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/wire"
)

// A setup whose JetStream requests are each slow (a loaded cluster: a few
// hundred milliseconds a request) takes longer than one attempt's first
// bound, and still completes: each attempt gets more time than the last,
// rather than every attempt running out half-way for ever (CI: three nodes
// that never started).
func TestSetupCompletesWhenEveryRequestIsSlow(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	// Setup's first request asks for the log's shard 0 (its shard count),
	// and making shard 0 asks again: twice in an attempt that made it.
	shard0 := &requestCounter{subject: []byte("$JS.API.STREAM.INFO." + wire.EventShardStream(0) + " ")}
	proxy := slowProxy(t, srv.Addr().String(), 150*time.Millisecond, shard0)
	cfg := Default()
	cfg.URL = "nats://" + proxy
	cfg.ReadyTimeout = 2 * time.Minute
	rec := &logRecorder{}
	cfg.Logger = slog.New(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open through a slow link: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	// Every answer comes at least 150 ms late, and setup makes far more
	// than 50 requests one after another: its first attempt ran out.
	retried := rec.matching("setting up TAH streams: retrying")
	if len(retried) == 0 {
		t.Fatal("setup fit in its first attempt: the link was not slow enough to show the retry")
	}
	t.Logf("%d attempts ran out before the one that completed: %v", len(retried), retried)
	if !strings.Contains(retried[0], "next_try_within=10s") {
		t.Errorf("an attempt that ran out: %q, want the next given 10s", retried[0])
	}
	// The attempts after the first went on from where it stopped, past
	// the log, rather than making everything again.
	if n := shard0.count(); n != 2 {
		t.Errorf("setup asked for %s %d times, want 2 (its first attempt's): an attempt began again from the start", wire.EventShardStream(0), n)
	}
}

// requestCounter counts the requests on subject a client sends (what it
// writes to the server, in chunks that may cut a request in two).
type requestCounter struct {
	subject []byte
	mu      sync.Mutex
	tail    []byte // the end of the last chunk: a request cut in two
	n       int
}

func (r *requestCounter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf := append(r.tail, p...)
	r.n += bytes.Count(buf, r.subject)
	keep := min(len(buf), len(r.subject)-1)
	r.tail = append(r.tail[:0:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

func (r *requestCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// slowProxy forwards TCP connections to target, holding each chunk the
// server sends for delay: every request's answer comes that much later.
// What clients send is also written to seen.
func slowProxy(t *testing.T, target string, delay time.Duration, seen io.Writer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(io.MultiWriter(s, seen), c); s.Close() })
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	return l.Addr().String()
}
