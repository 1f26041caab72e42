package inspector

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHeadFoldsWholeCharacters(t *testing.T) {
	long := strings.Repeat("目录", foldAt)
	if h := head(long); !utf8.ValidString(h) || len(h) > foldAt+len(" …") {
		t.Errorf("head cut %d bytes into %q", len(h), h[len(h)-8:])
	}
	lines := strings.Repeat("line\n", 20)
	if h := head(lines); strings.Count(h, "\n") != 7 {
		t.Errorf("head kept %d lines", strings.Count(h, "\n")+1)
	}
}
