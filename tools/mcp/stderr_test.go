package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a time that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// records is a log that keeps its records' text, one a line.
type records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *records) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSpace(r.buf.String()), "\n")
}

func (r *records) count(substr string) int {
	n := 0
	for _, l := range r.lines() {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func testWriter(lim stderrLimits) (*logWriter, *records, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	lim.now = c.now
	r := &records{}
	return newLogWriter(slog.New(slog.NewTextHandler(r, nil)), lim, newTokenBucket(lim)), r, c
}

// TestStderrRate: a burst of lines is logged, the lines over the rate are
// counted and said in one record before the next line logged, and the
// bucket refills with time.
func TestStderrRate(t *testing.T) {
	w, r, c := testWriter(stderrLimits{lineBytes: 100, burst: 3, perSecond: 2, totalBytes: 1 << 20})
	_, _ = w.Write([]byte("one\ntwo\nthree\nfour\nfive\n"))
	if n := r.count(`msg="mcp server stderr"`); n != 3 {
		t.Fatalf("%d lines logged, want the burst of 3:\n%s", n, strings.Join(r.lines(), "\n"))
	}
	c.advance(time.Second) // two tokens
	_, _ = w.Write([]byte("six\nseven\neight\n"))
	lines := r.lines()
	if n := r.count(`msg="mcp server stderr"`); n != 5 || !strings.Contains(lines[3], "not logged: over the rate") || !strings.Contains(lines[3], "lines=2") ||
		!strings.Contains(lines[4], "line=six") || !strings.Contains(lines[5], "line=seven") {
		t.Fatalf("after a second:\n%s", strings.Join(lines, "\n"))
	}
	w.finish()
	if last := r.lines()[len(r.lines())-1]; !strings.Contains(last, "lines_not_logged=3") {
		t.Fatalf("the end of the run: %s", last)
	}
}

// TestStderrBounds: a line is cut at lineBytes however long it is (the
// writer keeps no more of it), control characters do not reach the log
// raw, and a run logs at most totalBytes, then says so once and drops the
// rest.
func TestStderrBounds(t *testing.T) {
	w, r, _ := testWriter(stderrLimits{lineBytes: 10, burst: 1e9, perSecond: 1e9, totalBytes: 1000})
	_, _ = w.Write([]byte("0123456789abcdef"))
	for range 100 {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1000))
	}
	if len(w.buf) > 10 || cap(w.buf) > 64 {
		t.Fatalf("the writer keeps %d bytes (capacity %d) of a long line", len(w.buf), cap(w.buf))
	}
	_, _ = w.Write([]byte("\nbell\a\x1b[31mred\n"))
	lines := r.lines()
	if len(lines) != 2 || !strings.Contains(lines[0], "line=0123456789 cut_bytes=100006") || !strings.Contains(lines[1], "line=\"bell\ufffd\ufffd[31m\" cut_bytes=3") {
		t.Fatalf("cut lines:\n%s", strings.Join(lines, "\n"))
	}
	for range 100 {
		_, _ = w.Write([]byte("a line\n"))
	}
	// 2 records so far (138 and 142 bytes), then 134 each: 5 more fit in 1000.
	if n := r.count("line=\"a line\""); n != 5 {
		t.Fatalf("%d lines logged under the total", n)
	}
	if n := r.count("passed what one run may log"); n != 1 {
		t.Fatalf("the total is said %d times", n)
	}
	w.finish()
	w.finish()
	if n := r.count("lines_not_logged=95"); n != 1 {
		t.Fatalf("the end of the run:\n%s", strings.Join(r.lines(), "\n"))
	}
	_, _ = w.Write([]byte("after the end\n"))
	if r.count("after the end") != 0 {
		t.Fatal("a line logged after the run's end")
	}
}
