package openai

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// stream assembles a streamed answer from its chunks.
type stream struct {
	onDelta   func(llm.Delta)
	delivered bool

	model     string
	content   strings.Builder
	reasoning strings.Builder
	calls     []*call
	byIndex   map[int]int // the server's index → position in calls
	finish    string
	finished  bool
	usage     *chatUsage
}

type call struct {
	id, name string
	args     strings.Builder
}

func newStream(onDelta func(llm.Delta)) *stream {
	return &stream{onDelta: onDelta, byIndex: map[int]int{}}
}

func (s *stream) emit(d llm.Delta) {
	s.delivered = true
	s.onDelta(d)
}

// read consumes the SSE body up to "data: [DONE]". A body that ends without it is
// accepted when a finish_reason was seen (some compatible servers omit [DONE]);
// otherwise it is a broken connection (io.ErrUnexpectedEOF).
func (s *stream) read(body io.Reader) error {
	sse := httpx.NewSSEReader(body)
	defer sse.Close()
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			if s.finished {
				return nil
			}
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		data := strings.TrimSpace(ev.Data)
		if data == "[DONE]" {
			return nil
		}
		if data == "" {
			continue
		}
		var ch chatResponse
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return malformed(err)
		}
		if ch.Error != nil || ev.Type == "error" {
			if ch.Error == nil {
				ch.Error = &apiError{Message: httpx.Clip(data, 500)}
			}
			return ch.Error.providerError()
		}
		s.chunk(&ch)
	}
}

func (s *stream) chunk(ch *chatResponse) {
	if ch.Model != "" && s.model == "" {
		s.model = ch.Model
	}
	if ch.Usage != nil {
		s.usage = ch.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // n > 1 is never asked for
		}
		if d := c.Delta; d != nil {
			if r := d.reasoning(); r != "" {
				s.reasoning.WriteString(r)
				s.emit(llm.Delta{Reasoning: r})
			}
			if d.Content != nil && *d.Content != "" {
				s.content.WriteString(*d.Content)
				s.emit(llm.Delta{Text: *d.Content})
			}
			for _, tc := range d.ToolCalls {
				s.toolCall(tc)
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.finish, s.finished = *c.FinishReason, true
		}
	}
}

// toolCall adds a piece of a tool call. Calls are told apart by their index; a
// server that sends no index (or the same one for every call) starts a new call
// with each new id.
func (s *stream) toolCall(tc chatToolCall) {
	pos := -1
	switch {
	case tc.Index != nil:
		if p, ok := s.byIndex[*tc.Index]; ok {
			pos = p
			if tc.ID != "" && s.calls[p].id != "" && tc.ID != s.calls[p].id {
				pos = -1
			}
		}
	case tc.ID == "" && len(s.calls) > 0:
		pos = len(s.calls) - 1
	case tc.ID != "" && len(s.calls) > 0 && s.calls[len(s.calls)-1].id == tc.ID:
		pos = len(s.calls) - 1
	}
	d := llm.ToolCallDelta{ArgumentsDelta: tc.Function.Arguments}
	if pos < 0 {
		pos = len(s.calls)
		s.calls = append(s.calls, &call{})
		if tc.Index != nil {
			s.byIndex[*tc.Index] = pos
		}
	}
	c := s.calls[pos]
	if c.id == "" && tc.ID != "" {
		c.id, d.ID = tc.ID, tc.ID
	}
	if c.name == "" && tc.Function.Name != "" {
		c.name, d.Name = tc.Function.Name, tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
	d.Index = pos
	if d.ID != "" || d.Name != "" || d.ArgumentsDelta != "" {
		s.emit(llm.Delta{ToolCall: &d})
	}
}

func (s *stream) response() llm.Response {
	r := llm.Response{
		Model:     s.model,
		Content:   s.content.String(),
		Reasoning: s.reasoning.String(),
		Usage:     s.usage.usage(),
	}
	for i, c := range s.calls {
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{
			ID: callID(c.id, i), Name: c.name, Arguments: httpx.Arguments(c.args.String()),
		})
	}
	r.FinishReason = finishReason(s.finish, len(r.ToolCalls) > 0)
	return r
}
