package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"

	"github.com/tah-dev/tah/llm"
)

// RequestHasher computes RequestSHA256 of one session's requests, step after
// step, encoding only the messages it has not hashed yet: the messages of a
// request are the JSON array right after its model, so when they begin with
// the previous request's, the hash of those is taken up where it was left.
// A step in a long turn then costs its new messages, not its whole history
// (the encoding and hashing of the whole request was a quarter of a step's
// CPU). Sum gives what RequestSHA256 gives, always (TestRequestHasher). The
// zero value is ready; it is not safe for concurrent use.
type RequestHasher struct {
	model string
	// h has hashed the request's head and the messages in seen, each after
	// a comma but the first.
	h    hash.Hash
	seen []llm.Message
}

// messagesKey is where a request's messages begin, in its JSON.
var messagesKey = []byte(`"messages":[`)

// Sum is RequestSHA256(req).
func (r *RequestHasher) Sum(req llm.Request) (string, error) {
	if req.Messages == nil {
		return RequestSHA256(req) // "messages":null: nothing to take up
	}
	head, tail, err := requestFrame(req)
	if err != nil {
		return "", err
	}
	n := r.common(req)
	if n == 0 {
		r.h, r.seen, r.model = sha256.New(), r.seen[:0], req.Model
		r.h.Write(head)
	}
	for i := n; i < len(req.Messages); i++ {
		b, err := json.Marshal(req.Messages[i])
		if err != nil {
			r.h = nil
			return "", fmt.Errorf("request not hashed: %w: %v", ErrMalformed, err)
		}
		if i > 0 {
			r.h.Write([]byte{','})
		}
		r.h.Write(b)
	}
	r.seen = append(r.seen[:n], req.Messages[n:]...)
	c, err := r.h.(hash.Cloner).Clone()
	if err != nil {
		return RequestSHA256(req)
	}
	c.Write(tail)
	return hex.EncodeToString(c.Sum(nil)), nil
}

// common is how many of req's first messages were hashed already: all of
// the hashed ones when they are req's first, else none.
func (r *RequestHasher) common(req llm.Request) int {
	if r.h == nil || req.Model != r.model || len(r.seen) > len(req.Messages) {
		return 0
	}
	for i := range r.seen {
		if !sameMessage(r.seen[i], req.Messages[i]) {
			return 0
		}
	}
	return len(r.seen)
}

// requestFrame is req's JSON before its first message and after its last.
func requestFrame(req llm.Request) (head, tail []byte, err error) {
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
	return b[:end], b[end:], nil
}

// sameMessage reports whether a and b encode alike. The strings of a shared
// history compare by pointer first, so this is cheap where it matters.
func sameMessage(a, b llm.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID ||
		a.Name != b.Name || a.IsError != b.IsError || len(a.ToolCalls) != len(b.ToolCalls) {
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
