// Package jsonx appends the JSON of values that TAH writes on its hot paths
// (a record's header, a token delta, the payloads of a step's events)
// without encoding/json's reflection, byte for byte as json.Marshal would
// write them: its fuzz tests hold every function here to Marshal's output.
//
// Go 1.27's encoding/json/jsontext.AppendQuote does the same for any string,
// but the module still builds with Go 1.26 (go.mod), where jsontext sits
// behind GOEXPERIMENT=jsonv2.
package jsonx

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// invalidUTF8 is what Marshal writes for a byte of invalid UTF-8 in a
// string: U+FFFD, as the escape \ufffd (Go 1.26's encoding/json) or as the
// character itself (Go 1.27's, built on encoding/json/v2), asked of the
// Marshal this binary has.
var invalidUTF8 = func() string {
	q, err := json.Marshal("\xff")
	if err != nil || len(q) < 2 {
		panic(fmt.Sprintf("jsonx: json.Marshal of invalid UTF-8: %q, %v", q, err))
	}
	return string(q[1 : len(q)-1])
}()

// plain[c] is true for the ASCII bytes Marshal writes as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as json.Marshal writes it: between quotes, with
// '"' and '\\' escaped, control characters as \n, \r, \t, \b, \f or \u00XX,
// '<', '>' and '&' as \u003c, \u003e and \u0026 (Marshal's HTML escaping),
// U+2028 and U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8
// as U+FFFD (invalidUTF8). A run of bytes that need nothing is copied at
// once.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, s[start:i]...)
			b = append(b, invalidUTF8...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f as json.Marshal writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21
// on (with at least two exponent digits dropped to Marshal's "e-7"). ok is
// false for NaN and the infinities, which Marshal refuses.
func AppendFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as Marshal does
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b, true
}
