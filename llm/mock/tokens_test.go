package mock

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitTokens(t *testing.T) {
	tests := map[string][]string{
		"Hello, world.":         {"Hello, ", "world."},
		"a  b\n\nc":             {"a  ", "b\n\n", "c"},
		"分析这个项目":                {"分", "析", "这", "个", "项", "目"},
		"用 `list_files` 查看":     {"用 ", "`list_fi", "les` ", "查", "看"},
		"https://example.com/x": {"https://", "example.", "com/x"},
		"":                      nil,
		"  lead":                {"  ", "lead"},
	}
	for in, want := range tests {
		got := splitTokens(in)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("splitTokens(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSplitTokens(f *testing.F) {
	for _, s := range []string{"Hello, world.", "分析这个项目的目录结构", "a\tb\r\nc", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := splitTokens(s)
		if strings.Join(toks, "") != s {
			t.Fatalf("tokens %q do not make %q", toks, s)
		}
		for _, tok := range toks {
			if tok == "" {
				t.Fatalf("an empty token in %q", toks)
			}
		}
	})
}
