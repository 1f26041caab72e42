package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// stream assembles a streamed message from its events.
type stream struct {
	onDelta   func(llm.Delta)
	delivered bool

	model     string
	text      strings.Builder
	thinking  strings.Builder
	calls     []*call
	blocks    map[int]*call // content block index → tool call (tool_use blocks only)
	stop      string
	usage     usage
	completed bool // message_stop seen
}

type call struct {
	pos      int
	id, name string
	input    strings.Builder
}

func newStream(onDelta func(llm.Delta)) *stream {
	return &stream{onDelta: onDelta, blocks: map[int]*call{}}
}

func (s *stream) emit(d llm.Delta) {
	s.delivered = true
	s.onDelta(d)
}

// read consumes the SSE body up to message_stop; a body that ends before it is a
// broken connection (io.ErrUnexpectedEOF).
func (s *stream) read(body io.Reader) error {
	sse := httpx.NewSSEReader(body)
	defer sse.Close()
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			if s.completed {
				return nil
			}
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		var e streamEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return malformed(err)
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		if err := s.event(&e); err != nil {
			return err
		}
		if s.completed {
			return nil
		}
	}
}

func (s *stream) event(e *streamEvent) error {
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			s.model = e.Message.Model
			s.usage = e.Message.Usage
		}
	case "content_block_start":
		if b := e.ContentBlock; b != nil {
			switch b.Type {
			case "tool_use":
				c := &call{pos: len(s.calls), id: b.ID, name: b.Name}
				s.calls = append(s.calls, c)
				s.blocks[e.Index] = c
				s.emit(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: c.pos, ID: c.id, Name: c.name}})
			case "text":
				if b.Text != "" {
					s.text.WriteString(b.Text)
					s.emit(llm.Delta{Text: b.Text})
				}
			}
		}
	case "content_block_delta":
		var d blockDelta
		if err := json.Unmarshal(e.Delta, &d); err != nil {
			return malformed(err)
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				s.text.WriteString(d.Text)
				s.emit(llm.Delta{Text: d.Text})
			}
		case "thinking_delta":
			if d.Thinking != "" {
				s.thinking.WriteString(d.Thinking)
				s.emit(llm.Delta{Reasoning: d.Thinking})
			}
		case "input_json_delta":
			c, ok := s.blocks[e.Index]
			if !ok {
				return malformed(errors.New("input_json_delta for a block that is not a tool_use"))
			}
			if d.PartialJSON != "" {
				c.input.WriteString(d.PartialJSON)
				s.emit(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: c.pos, ArgumentsDelta: d.PartialJSON}})
			}
		}
	case "message_delta":
		var d messageDelta
		if len(e.Delta) > 0 {
			if err := json.Unmarshal(e.Delta, &d); err != nil {
				return malformed(err)
			}
		}
		if d.StopReason != "" {
			s.stop = d.StopReason
		}
		if u := e.Usage; u != nil {
			// message_delta's usage is cumulative; input counts appear here only
			// on some servers, so keep message_start's when absent.
			s.usage.OutputTokens = u.OutputTokens
			if u.InputTokens != 0 {
				s.usage.InputTokens = u.InputTokens
			}
			if u.CacheReadInputTokens != 0 {
				s.usage.CacheReadInputTokens = u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens != 0 {
				s.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
			}
		}
	case "message_stop":
		s.completed = true
	case "error":
		if e.Error == nil {
			e.Error = &apiError{}
		}
		return e.Error.providerError()
	}
	// ping, content_block_stop and unknown events need nothing.
	return nil
}

func (s *stream) response() llm.Response {
	r := llm.Response{
		Model:        s.model,
		Content:      s.text.String(),
		Reasoning:    s.thinking.String(),
		FinishReason: finishReason(s.stop),
		Usage:        s.usage.usage(),
	}
	for _, c := range s.calls {
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: c.id, Name: c.name, Arguments: httpx.Arguments(c.input.String())})
	}
	return r
}
