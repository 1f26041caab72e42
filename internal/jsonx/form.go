package jsonx

import (
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects MarshalForm follows; a
// deeper value is left to encoding/json.
const maxDepth = 64

// MarshalForm reports whether b is one JSON value that encoding/json's
// Marshal of a json.RawMessage writes back unchanged: valid, with no
// whitespace between its tokens, no '<', '>' or '&' and no U+2028 or U+2029
// (Marshal escapes them), and valid UTF-8. That is what json.Marshal of any
// value writes (event.New's payloads), so a record's payloads can be copied
// into its body as they are instead of being compacted again. It never says
// true of bytes that Marshal would change or refuse; when it says false,
// Marshal decides (what it refuses is malformed). A single scan, no
// allocation.
func MarshalForm(b []byte) bool {
	end, ok := ValueEnd(b, 0)
	return ok && end == len(b)
}

// ValueEnd is where the value that starts at b[i] ends, when it is in
// MarshalForm.
func ValueEnd(b []byte, i int) (end int, ok bool) {
	s := scanner{b: b, i: i}
	ok = s.value(0)
	return s.i, ok
}

// NumberEnd is where the number that starts at b[i] ends, when it is one
// of JSON's grammar.
func NumberEnd(b []byte, i int) (end int, ok bool) {
	s := scanner{b: b, i: i}
	ok = s.number()
	return s.i, ok
}

// scanner is MarshalForm's position in its bytes.
type scanner struct {
	b []byte
	i int
}

// eat consumes c when it is the next byte.
func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) || depth >= maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		if s.eat('}') {
			return true
		}
		for {
			if !s.str() || !s.eat(':') || !s.value(depth+1) {
				return false
			}
			if !s.eat(',') {
				return s.eat('}')
			}
		}
	case c == '[':
		s.i++
		if s.eat(']') {
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			if !s.eat(',') {
				return s.eat(']')
			}
		}
	case c == '"':
		return s.str()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// digits consumes one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// number consumes a number of JSON's grammar, as it is written: Marshal
// keeps a raw value's numbers as they are.
func (s *scanner) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.eat('.') && !s.digits() {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		return s.digits()
	}
	return true
}

// str consumes a string: its escapes must be JSON's (Marshal keeps them as
// they are), its other bytes printable and valid UTF-8, none that Marshal
// escapes.
func (s *scanner) str() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return false
			}
			s.i += n
		}
	}
	return false
}
