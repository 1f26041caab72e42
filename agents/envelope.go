package agents

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tah-dev/tah/wire"
)

// ErrBadRequest wraps why a prompt request is refused with status 400.
var ErrBadRequest = errors.New("bad prompt request")

// ParseRequest reads a prompt request as the protocol's discrimination rule
// says (§5.3): after leading whitespace, a '{' starts a JSON envelope, which
// must hold a non-empty "prompt" string; anything else is the prompt as
// UTF-8 text. An empty request, an envelope that is not one, an attachment
// whose content is not standard padded base64 without whitespace, or one
// with no filename, is refused (ErrBadRequest). Unknown fields are ignored.
func ParseRequest(data []byte) (wire.Envelope, error) {
	bad := func(format string, args ...any) (wire.Envelope, error) {
		return wire.Envelope{}, fmt.Errorf(format+": %w", append(args, ErrBadRequest)...)
	}
	if len(data) == 0 {
		return bad("the request is empty: send the prompt as text, or {\"prompt\": \"...\"}")
	}
	trimmed := bytes.TrimLeft(data, "\t\n\r ")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if !utf8.Valid(data) {
			return bad("the request is not UTF-8 text")
		}
		return wire.Envelope{Prompt: string(data)}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return bad("the request starts with '{' but is not a JSON object: %v", err)
	}
	var env wire.Envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return bad("the envelope's fields have the wrong types: %v", err)
	}
	var prompt any
	if raw, ok := fields["prompt"]; !ok || json.Unmarshal(raw, &prompt) != nil {
		return bad("the envelope has no \"prompt\" string")
	}
	if _, ok := prompt.(string); !ok || env.Prompt == "" {
		return bad("the envelope's \"prompt\" must be a non-empty string")
	}
	switch env.WhenBusy {
	case "", wire.WhenBusySteer, wire.WhenBusyInterrupt:
	default:
		return bad("the envelope's \"when_busy\" %q is not %q or %q (absent: a prompt to a busy session fails with 409)",
			env.WhenBusy, wire.WhenBusySteer, wire.WhenBusyInterrupt)
	}
	for i, a := range env.Attachments {
		if a.Filename == "" {
			return bad("attachment %d has no filename", i)
		}
		if _, err := decodeContent(a.Content); err != nil {
			return bad("attachment %q: %v", a.Filename, err)
		}
	}
	return env, nil
}

// decodeContent decodes an attachment's content: standard, padded base64
// (RFC 4648 §4) without whitespace.
func decodeContent(s string) ([]byte, error) {
	if strings.ContainsAny(s, " \t\r\n") {
		return nil, errors.New("its content holds whitespace (standard base64 without line breaks is required)")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("its content is not standard padded base64: %v", err)
	}
	return b, nil
}

// userText is the user message of the turn a prompt starts: the prompt, then
// each attachment, which must be text (UTF-8 without NUL bytes: the models
// TAH drives take text), in an <attachment filename="..."> element.
func userText(env wire.Envelope) (string, error) {
	if len(env.Attachments) == 0 {
		return env.Prompt, nil
	}
	var b strings.Builder
	b.WriteString(env.Prompt)
	for _, a := range env.Attachments {
		content, err := decodeContent(a.Content)
		if err != nil {
			return "", fmt.Errorf("attachment %q: %v: %w", a.Filename, err, ErrBadRequest)
		}
		if !utf8.Valid(content) || bytes.IndexByte(content, 0) >= 0 {
			return "", fmt.Errorf("attachment %q is binary: this agent takes text attachments only (send the text, or a file a tool can read): %w", a.Filename, ErrBadRequest)
		}
		name, _ := json.Marshal(a.Filename)
		fmt.Fprintf(&b, "\n\n<attachment filename=%s>\n%s\n</attachment>", name, content)
	}
	return b.String(), nil
}

// formatSize writes n bytes as the protocol's max_payload: an integer and
// B, KB, MB or GB (the largest unit that divides n).
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}
