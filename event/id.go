package event

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// MaxSessionIDLen is the longest session id accepted.
const MaxSessionIDLen = 128

// ValidSessionID reports, as an error wrapping ErrInvalidSessionID, whether id can
// name a session. Ids are NATS subject tokens and actor names, so they are
// 1 to 128 characters of letters, digits, '-' and '_'.
func ValidSessionID(id string) error {
	if id == "" {
		return fmt.Errorf("empty session id: %w", ErrInvalidSessionID)
	}
	if len(id) > MaxSessionIDLen {
		return fmt.Errorf("session id is %d bytes, at most %d allowed: %w", len(id), MaxSessionIDLen, ErrInvalidSessionID)
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("session id %q: character %q at %d is not allowed (use letters, digits, '-' and '_'): %w", id, r, i, ErrInvalidSessionID)
		}
	}
	return nil
}

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford's base32, lower case

// NewSessionID returns a fresh random session id: "s_" and 20 base32 characters.
func NewSessionID() string { return "s_" + randomToken(20) }

// NewID returns a fresh random id with the given prefix, for steps and artifacts.
func NewID(prefix string) string { return prefix + randomToken(16) }

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, c := range b {
		sb.WriteByte(idAlphabet[int(c)%len(idAlphabet)])
	}
	return sb.String()
}
