package httpx

import (
	"bufio"
	"errors"
	"io"
	"strings"
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

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event. It returns io.EOF when the stream ends cleanly
// between events, and io.ErrUnexpectedEOF when it ends inside one.
func (s *SSEReader) Next() (Event, error) {
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
	buf = buf[:len(buf)-1]
	if n := len(buf); n > 0 && buf[n-1] == '\r' {
		buf = buf[:n-1]
	}
	return string(buf), nil
}
