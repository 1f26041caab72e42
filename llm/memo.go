package llm

import (
	"bytes"
	"context"
	"slices"
	"sync"
)

// Memo keeps the wire encoding of a conversation's messages from one request
// to the next, so that a provider encodes only the messages that changed
// since its last request. A session sends its whole history again with every
// LLM step; encoding all of it each time made a step's CPU grow with the
// history (in row 9 of the bench, a worker node spent 11% of its CPU
// encoding request bodies).
//
// A Memo belongs to one conversation (a session's loop keeps one while its
// actor lives) and holds, beside each encoding, the message it was made
// from: a message is reused only while the request carries an equal one at
// the same place. Comparing is cheap where it matters, since the history
// sent again shares its strings with the last request (Go compares strings
// that share their bytes without reading them). What it costs is memory:
// about the encoded size of the history sent, released with the Memo.
//
// It is safe for concurrent use; requests of one conversation are made one
// at a time, so the lock is never contended.
type Memo struct {
	mu     sync.Mutex
	format string
	msgs   []Message
	enc    [][]byte
	// The tools of the last EncodedTools, in toolsFormat, and their
	// encoding.
	toolsFormat string
	tools       []ToolSchema
	toolsEnc    []byte
}

// Encoded returns the encoding of each of msgs in the given format (a name
// for encode's wire format: a provider's), made by encode, except for the
// leading messages equal to those of the memo's last call with the same
// format, whose encodings it returns again. The caller must not modify the
// encodings it returns. A nil Memo encodes every message.
func (m *Memo) Encoded(format string, msgs []Message, encode func(Message) ([]byte, error)) ([][]byte, error) {
	if m == nil {
		out := make([][]byte, len(msgs))
		for i, msg := range msgs {
			b, err := encode(msg)
			if err != nil {
				return nil, err
			}
			out[i] = b
		}
		return out, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := 0
	if m.format == format {
		for keep < len(msgs) && keep < len(m.msgs) && SameMessage(m.msgs[keep], msgs[keep]) {
			keep++
		}
	}
	m.format = format
	m.msgs, m.enc = m.msgs[:keep], m.enc[:keep]
	for _, msg := range msgs[keep:] {
		b, err := encode(msg)
		if err != nil {
			// What was encoded stays: it matches the messages kept.
			return nil, err
		}
		m.msgs, m.enc = append(m.msgs, msg), append(m.enc, b)
	}
	out := make([][]byte, len(msgs))
	copy(out, m.enc)
	return out, nil
}

// EncodedTools returns the encoding of tools in the given format, made by
// encode, or the one it made for the memo's last call with the same format
// and the same tools: a session offers the same tools at each of its
// requests, and encoding their schemas again was most of what the body
// around the memo's messages cost (bench row 9). The caller must not modify
// the encoding it returns. A nil Memo encodes them.
func (m *Memo) EncodedTools(format string, tools []ToolSchema, encode func([]ToolSchema) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return encode(tools)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.toolsEnc != nil && m.toolsFormat == format && slices.EqualFunc(m.tools, tools, sameTool) {
		return m.toolsEnc, nil
	}
	b, err := encode(tools)
	if err != nil {
		return nil, err
	}
	m.toolsFormat, m.tools, m.toolsEnc = format, slices.Clone(tools), b
	return b, nil
}

// sameTool reports whether a and b are the same tool, field by field.
func sameTool(a, b ToolSchema) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}

// SameMessage reports whether a and b are the same message, field by field
// (TestSameMessageComparesEveryField keeps it so). The strings of a history
// sent again are the ones it held, which compare by pointer first: cheap
// where it matters (Memo, and event.RequestHasher).
func SameMessage(a, b Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID ||
		a.Name != b.Name || a.IsError != b.IsError || a.Steer != b.Steer || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i, c := range a.ToolCalls {
		d := b.ToolCalls[i]
		if c.ID != d.ID || c.Name != d.Name || !bytes.Equal(c.Arguments, d.Arguments) {
			return false
		}
	}
	return true
}

type memoKey struct{}

// WithMemo returns ctx carrying m, for the requests made with it: a
// provider that encodes messages takes it up (MemoFrom).
func WithMemo(ctx context.Context, m *Memo) context.Context {
	return context.WithValue(ctx, memoKey{}, m)
}

// MemoFrom returns the Memo ctx carries, or nil (which Encoded accepts).
func MemoFrom(ctx context.Context) *Memo {
	m, _ := ctx.Value(memoKey{}).(*Memo)
	return m
}
