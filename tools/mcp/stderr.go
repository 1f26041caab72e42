package mcp

import (
	"bytes"
	"log/slog"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// stderrLimits bound what a stdio server's stderr puts in the log: servers
// print their banners and failures there, but a broken one may print
// megabytes a second, and the node's log must not grow with it.
type stderrLimits struct {
	// lineBytes is the longest line logged; a longer one is cut, and the
	// record says how many bytes were cut.
	lineBytes int
	// burst lines are logged at once; then perSecond a second (a token
	// bucket of the server, across its restarts: a server that crashes in
	// a loop does not start afresh each time). The lines over the rate are
	// counted, and one record says how many before the next line logged.
	burst, perSecond float64
	// totalBytes bounds what one run of the server (a child process) puts
	// in the log, each record counted as its line plus recordOverhead; the
	// rest of its stderr is read and dropped, and counted.
	totalBytes int64
	// now is the clock of the rate (time.Now).
	now func() time.Time
}

// defaultStderrLimits: a crash's stack trace passes whole; a flood costs the
// log at most about 4 MiB per run of the server, and 10 lines a second.
func defaultStderrLimits() stderrLimits {
	return stderrLimits{lineBytes: 2048, burst: 100, perSecond: 10, totalBytes: 4 << 20, now: time.Now}
}

// recordOverhead is what a record costs beyond its line: time, level,
// message and the server's name.
const recordOverhead = 128

// tokenBucket is the rate of a server's stderr lines.
type tokenBucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
	lim    stderrLimits
}

func newTokenBucket(lim stderrLimits) *tokenBucket {
	return &tokenBucket{tokens: lim.burst, last: lim.now(), lim: lim}
}

// take reports whether a line may be logged now, and takes its token.
func (b *tokenBucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.lim.now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.lim.burst, b.tokens+d.Seconds()*b.lim.perSecond)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// logWriter turns what one run of a stdio server writes on its stderr into
// log records, a line each, within the server's limits (stderrLimits). It
// keeps at most lineBytes of a line, however long, and always takes what
// it is given: a server never blocks on its stderr.
type logWriter struct {
	log  *slog.Logger
	lim  stderrLimits
	rate *tokenBucket

	mu         sync.Mutex
	buf        []byte // the line so far, up to lim.lineBytes
	lineLen    int    // its length, cut bytes included
	charged    int64  // what the records cost so far (totalBytes)
	full       bool   // totalBytes reached: nothing more is logged
	suppressed int    // lines not logged since the last record
	dropped    int    // lines not logged in this run
	finished   bool
}

func newLogWriter(log *slog.Logger, lim stderrLimits, rate *tokenBucket) *logWriter {
	return &logWriter{log: log, lim: lim, rate: rate}
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		seg, rest, complete := bytes.Cut(p, []byte{'\n'})
		if room := w.lim.lineBytes - len(w.buf); room > 0 {
			w.buf = append(w.buf, seg[:min(room, len(seg))]...)
		}
		w.lineLen += len(seg)
		if !complete {
			break
		}
		w.endLine()
		p = rest
	}
	return n, nil
}

// endLine logs the line in buf, or counts it as suppressed.
func (w *logWriter) endLine() {
	line, cut := clean(w.buf), w.lineLen-len(w.buf)
	w.buf, w.lineLen = w.buf[:0], 0
	if line == "" || w.finished {
		return
	}
	if w.full || !w.rate.take() {
		w.suppressed++
		w.dropped++
		return
	}
	cost := int64(len(line) + recordOverhead)
	if w.suppressed > 0 {
		cost += recordOverhead
	}
	if w.charged+cost > w.lim.totalBytes {
		w.full = true
		w.suppressed++
		w.dropped++
		w.log.Warn("mcp: the server's stderr passed what one run may log; the rest of it is dropped until the server restarts",
			"limit_bytes", w.lim.totalBytes, "lines_not_logged", w.dropped)
		return
	}
	w.charged += cost
	if w.suppressed > 0 {
		w.log.Warn("mcp: lines of the server's stderr were not logged: over the rate", "lines", w.suppressed, "per_second", w.lim.perSecond)
		w.suppressed = 0
	}
	if cut > 0 {
		w.log.Info("mcp server stderr", "line", line, "cut_bytes", cut)
	} else {
		w.log.Info("mcp server stderr", "line", line)
	}
}

// finish logs a line left without its newline, and how many lines of this
// run were not logged: the server's run is over.
func (w *logWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	if w.lineLen > 0 {
		w.endLine()
	}
	w.finished = true
	if w.dropped > 0 {
		w.log.Warn("mcp: the server's run is over; lines of its stderr were not logged (limits in docs/operations.md)", "lines_not_logged", w.dropped)
	}
}

// clean is line without surrounding space, its control characters and
// invalid UTF-8 as U+FFFD: a record costs what its line does.
func clean(line []byte) string {
	line = bytes.TrimSpace(line)
	ok := utf8.Valid(line)
	for _, c := range line {
		if c < 0x20 && c != '\t' || c == 0x7f {
			ok = false
			break
		}
	}
	if ok {
		return string(line)
	}
	return string(bytes.Map(func(r rune) rune {
		if r == '\t' || unicode.IsPrint(r) {
			return r
		}
		return utf8.RuneError
	}, bytes.ToValidUTF8(line, []byte("\uFFFD"))))
}
