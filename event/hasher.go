package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"slices"

	"github.com/tah-dev/tah/llm"
)

// RequestHasher computes RequestSHA256 of one session's requests, step after
// step, encoding only the messages it has not hashed yet: the messages of a
// request are the JSON array right after its model, so when they begin with
// the previous request's, the hash of those is taken up where it was left.
// A step in a long turn then costs its new messages, not its whole history
// (the encoding and hashing of the whole request was a quarter of a step's
// CPU). The request's JSON around its messages (its model, tools and
// options) is encoded again only when they change. Sum gives what
// RequestSHA256 gives, always (TestRequestHasher). The zero value is ready;
// it is not safe for concurrent use.
type RequestHasher struct {
	// h has hashed head, the JSON of a request before its messages, and the
	// messages in seen, each after a comma but the first.
	h    hash.Hash
	head []byte
	seen []llm.Message
	// base is the array of the messages last hashed (their first), for
	// SumGrown.
	base *llm.Message
	// frame is the JSON around the messages of the last request.
	frame requestFrame
	// buf holds a message's JSON on its way into h, kept from one to the
	// next.
	buf []byte
}

// requestFrame is a request's JSON before its first message (head) and
// after its last (tail), and a copy of what they encode.
type requestFrame struct {
	model      string
	tools      []llm.ToolSchema
	options    llm.Options
	head, tail []byte
}

// messagesKey is where a request's messages begin, in its JSON.
var messagesKey = []byte(`"messages":[`)

// Sum is RequestSHA256(req).
func (r *RequestHasher) Sum(req llm.Request) (string, error) {
	return r.sum(req, false)
}

// SumGrown is Sum for a caller that never writes a message of an array
// again once it was hashed, and only appends to it: when req.Messages begins
// the same array as the messages last hashed, with at least as many, those
// are taken as hashed without comparing them to the request's, so that a
// step costs its new messages however long the history. projection.State's
// history is such an array (Apply appends to it, and makes a new one for any
// other change). Any other request is Sum's.
func (r *RequestHasher) SumGrown(req llm.Request) (string, error) {
	return r.sum(req, true)
}

func (r *RequestHasher) sum(req llm.Request, grown bool) (string, error) {
	if req.Messages == nil {
		return RequestSHA256(req) // "messages":null: nothing to take up
	}
	head, tail, err := r.frame.of(req)
	if err != nil {
		return "", err
	}
	n := r.common(req, head, grown)
	if n == 0 {
		r.h, r.head, r.seen = sha256.New(), head, r.seen[:0]
		r.h.Write(head)
	}
	for i := n; i < len(req.Messages); i++ {
		r.buf = r.buf[:0]
		if i > 0 {
			r.buf = append(r.buf, ',')
		}
		var ok bool
		if r.buf, ok = req.Messages[i].AppendJSON(r.buf); !ok {
			// Raw arguments Marshal compacts or refuses: its bytes.
			raw, err := json.Marshal(req.Messages[i])
			if err != nil {
				r.h = nil
				return "", fmt.Errorf("request not hashed: %w: %v", ErrMalformed, err)
			}
			r.buf = append(r.buf[:min(i, 1)], raw...)
		}
		r.h.Write(r.buf)
	}
	r.seen = append(r.seen[:n], req.Messages[n:]...)
	r.base = nil
	if len(req.Messages) > 0 {
		r.base = &req.Messages[0]
	}
	c, err := r.h.(hash.Cloner).Clone()
	if err != nil {
		return RequestSHA256(req)
	}
	c.Write(tail)
	var sum [sha256.Size]byte
	return hex.EncodeToString(c.Sum(sum[:0])), nil
}

// common is how many of req's first messages were hashed already, after the
// same head: all of the hashed ones when they are req's first, else none.
// grown takes them to be when req's messages begin the same array (SumGrown).
func (r *RequestHasher) common(req llm.Request, head []byte, grown bool) int {
	if r.h == nil || !bytes.Equal(r.head, head) || len(r.seen) > len(req.Messages) {
		return 0
	}
	if grown && len(r.seen) > 0 && r.base == &req.Messages[0] {
		return len(r.seen)
	}
	for i := range r.seen {
		if !llm.SameMessage(r.seen[i], req.Messages[i]) {
			return 0
		}
	}
	return len(r.seen)
}

// of is req's JSON before its first message and after its last: those of
// the last request when req has the same model, tools and options, else
// encoded again and kept, with a copy of what they encode (the caller may
// change its tools or options in place later).
func (f *requestFrame) of(req llm.Request) (head, tail []byte, err error) {
	if f.head != nil && req.Model == f.model && sameOptions(req.Options, f.options) && sameTools(req.Tools, f.tools) {
		return f.head, f.tail, nil
	}
	head, tail, err = encodeFrame(req)
	if err != nil {
		return nil, nil, err
	}
	*f = requestFrame{model: req.Model, tools: cloneTools(req.Tools), options: cloneOptions(req.Options), head: head, tail: tail}
	return head, tail, nil
}

// sameTools reports whether a and b encode alike: every field of
// llm.ToolSchema (TestFrameCopiesEveryField).
func sameTools(a, b []llm.ToolSchema) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description ||
			!bytes.Equal(a[i].InputSchema, b[i].InputSchema) || (a[i].InputSchema == nil) != (b[i].InputSchema == nil) {
			return false
		}
	}
	return true
}

func cloneTools(tools []llm.ToolSchema) []llm.ToolSchema {
	if tools == nil {
		return nil
	}
	out := make([]llm.ToolSchema, len(tools))
	for i, t := range tools {
		t.InputSchema = bytes.Clone(t.InputSchema)
		out[i] = t
	}
	return out
}

// sameOptions reports whether a and b encode alike: every field of
// llm.Options (TestFrameCopiesEveryField).
func sameOptions(a, b llm.Options) bool {
	return a.MaxTokens == b.MaxTokens && sameFloat(a.Temperature, b.Temperature) && sameFloat(a.TopP, b.TopP) &&
		slices.Equal(a.Stop, b.Stop) && (a.Stop == nil) == (b.Stop == nil)
}

func sameFloat(a, b *float64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func cloneOptions(o llm.Options) llm.Options {
	if o.Temperature != nil {
		t := *o.Temperature
		o.Temperature = &t
	}
	if o.TopP != nil {
		p := *o.TopP
		o.TopP = &p
	}
	o.Stop = slices.Clone(o.Stop)
	return o
}

// encodeFrame is req's JSON before its first message and after its last.
func encodeFrame(req llm.Request) (head, tail []byte, err error) {
	req.Messages = []llm.Message{}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("request not hashed: %w: %v", ErrMalformed, err)
	}
	// The model comes first and its JSON string cannot hold the key's quote
	// unescaped: the first match is the key.
	i := bytes.Index(b, messagesKey)
	if i < 0 {
		return nil, nil, fmt.Errorf("request not hashed: %w: no messages in %s", ErrMalformed, b)
	}
	end := i + len(messagesKey)
	return b[:end:end], b[end:], nil
}
