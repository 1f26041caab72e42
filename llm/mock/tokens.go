package mock

import "unicode"

// splitTokens cuts s into the pieces the mock streams, so that joined they are s
// again: a word with the spaces that follow it; each CJK character on its own;
// long words in pieces of at most eight characters.
func splitTokens(s string) []string {
	var (
		out   []string
		start int
		runes int
		space bool // the current token has reached its trailing spaces
	)
	cut := func(i int) {
		if i > start {
			out = append(out, s[start:i])
		}
		start, runes, space = i, 0, false
	}
	for i, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = true
		case isCJK(r):
			cut(i)
			runes = 1
			space = true // a CJK character ends its token; spaces may follow
		default:
			if space || runes >= 8 {
				cut(i)
			}
			runes++
		}
	}
	cut(len(s))
	return out
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// hasCJK reports whether s holds Chinese, Japanese or Korean text.
func hasCJK(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
			unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}
