package wire

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"

	"github.com/tah-dev/tah/event"
)

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Token turns an id into a NATS subject token and KV key part: the id itself
// when it is 1 to 128 letters, digits, '_' or '-', otherwise "=" followed by
// the unpadded base64url of its bytes ("a.b" → "=YS5i").
func Token(id string) string {
	if tokenRE.MatchString(id) {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// FromToken is the id a Token was made of.
func FromToken(tok string) (string, error) {
	enc, ok := strings.CutPrefix(tok, "=")
	if !ok {
		if !tokenRE.MatchString(tok) {
			return "", fmt.Errorf("%q is not a token of an id", tok)
		}
		return tok, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("%q is not a token of an id: %w", tok, err)
	}
	return string(b), nil
}

// ValidSessionID is event.ValidSessionID: 1 to 128 letters, digits, '-' and
// '_', an error wrapping event.ErrInvalidSessionID otherwise.
func ValidSessionID(id string) error { return event.ValidSessionID(id) }

// MaxInputIDLen is the longest input id.
const MaxInputIDLen = 128

// ValidInputID reports what is wrong with an input id: 1 to 128 characters of
// letters, digits, '-', '_', '.' and ':'.
func ValidInputID(id string) error {
	if id == "" {
		return fmt.Errorf("empty input id")
	}
	if len(id) > MaxInputIDLen {
		return fmt.Errorf("input id is %d bytes, at most %d allowed", len(id), MaxInputIDLen)
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return fmt.Errorf("input id %q: character %q at %d is not allowed", id, r, i)
		}
	}
	return nil
}

// ValidSubject reports whether s is a subject one can publish to: at most 512
// bytes of dot-separated non-empty tokens without wildcards or whitespace.
func ValidSubject(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// ResultKey is the key of a tool call in ToolResultBucket:
// <tool>.<session token>.<call token>, with "_" for an empty session. The
// tool's name leads, so that a tool credential may write and read its own
// tools' calls only (ToolResultSubjects).
func ResultKey(tool, session, callID string) string {
	return Token(tool) + "." + callKey(session, callID)
}

// ResultKeyFilter matches the key of a call in ToolResultBucket whatever its
// tool: *.<session token>.<call token>.
func ResultKeyFilter(session, callID string) string { return "*." + callKey(session, callID) }

// callKey is <session token>.<call token>, with "_" for an empty session.
func callKey(session, callID string) string {
	s := "_"
	if session != "" {
		s = Token(session)
	}
	return s + "." + Token(callID)
}

// ToolResultStream is the stream of ToolResultBucket (a KV bucket's stream
// is KV_<bucket>).
const ToolResultStream = "KV_" + ToolResultBucket

// ToolResultSubjects is the filter of the subjects of tool's calls in
// ToolResultBucket: $KV.tah_tool_results.<tool>.>.
func ToolResultSubjects(tool string) string {
	return "$KV." + ToolResultBucket + "." + Token(tool) + ".>"
}
