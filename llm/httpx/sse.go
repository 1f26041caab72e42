package httpx

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
)

// MaxEventLine is the longest line an SSEReader accepts.
const MaxEventLine = 8 << 20

// ErrLineTooLong is returned by SSEReader.Next for a line over MaxEventLine.
var ErrLineTooLong = errors.New("server-sent event line too long")

// Event is one server-sent event.
type Event struct {
	// Type is the event's "event:" field; empty for the default "message".
	Type string
	// Data is its "data:" lines, joined with "\n".
	Data string
	ID   string
}

// SSEReader reads server-sent events as the HTML standard defines them: "field:
// value" lines, an event dispatched at each blank line, comments (":...") and
// unknown fields ignored, LF or CRLF line ends.
type SSEReader struct {
	r *bufio.Reader
}

// sseBufSize is the buffer of an SSEReader: a line longer than it is read in
// pieces (readLine), so it bounds nothing but the reads' size.
const sseBufSize = 64 << 10

// sseBufs keeps the buffers of closed SSEReaders: a model's answer is one
// stream, and a buffer made for each was, zeroed and collected, 5% of a
// node's CPU under load (row 9 of make bench, perf).
var sseBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sseBufSize) }}

// NewSSEReader reads events from r. Close gives its buffer back.
func NewSSEReader(r io.Reader) *SSEReader {
	br := sseBufs.Get().(*bufio.Reader)
	br.Reset(r)
	return &SSEReader{r: br}
}

// Close ends the reader's use of its buffer, for another SSEReader to take:
// after Close, Next returns io.EOF. It does not close the stream read.
func (s *SSEReader) Close() {
	if s.r == nil {
		return
	}
	s.r.Reset(nil) // holds nothing of the stream
	sseBufs.Put(s.r)
	s.r = nil
}

// Next returns the next event. It returns io.EOF when the stream ends cleanly
// between events, and io.ErrUnexpectedEOF when it ends inside one.
func (s *SSEReader) Next() (Event, error) {
	if s.r == nil {
		return Event{}, io.EOF // closed
	}
	var (
		ev      Event
		data    strings.Builder
		hasData bool
		pending bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && pending {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if line == "" {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			ev, pending = Event{}, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Type, pending = value, true
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData, pending = true, true
		case "id":
			ev.ID = value
		}
	}
}

func (s *SSEReader) readLine() (string, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if err == nil && buf == nil { // the whole line in the buffer: one copy
			return string(trimLineEnd(chunk)), nil
		}
		if len(buf)+len(chunk) > MaxEventLine {
			return "", ErrLineTooLong
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		break
	}
	return string(trimLineEnd(buf)), nil
}

// trimLineEnd drops a line's LF and the CR before it, if any.
func trimLineEnd(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}
