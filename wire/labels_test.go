package wire_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/tah-dev/tah/wire"
)

// manyLabels is n labels "kNNN" of values of size bytes.
func manyLabels(n, size int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%03d", i)] = strings.Repeat("v", size)
	}
	return m
}

// Labels at the limits pass; one byte or label over any of them, an empty
// key or a control character is refused, wrapping ErrInvalidLabels.
func TestCheckLabels(t *testing.T) {
	for name, ls := range map[string]map[string]string{
		"none":                 nil,
		"the most labels":      manyLabels(wire.MaxLabels, 10),
		"the longest key":      {strings.Repeat("k", wire.MaxLabelKeyBytes): "v"},
		"the longest value":    {"k": strings.Repeat("v", wire.MaxLabelValueBytes)},
		"an empty value":       {"k": ""},
		"the most bytes":       manyLabels(wire.MaxLabels, wire.MaxLabelsBytes/wire.MaxLabels-4),
		"any printable script": {"équipe": "données 数据", "a/b.c-d_e": "x=y z"},
	} {
		if err := wire.CheckLabels(ls); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		labels map[string]string
		says   string
	}{
		"a label too many":        {manyLabels(wire.MaxLabels+1, 1), "65 labels, over 64"},
		"a key a byte too long":   {map[string]string{strings.Repeat("k", wire.MaxLabelKeyBytes+1): "v"}, "the key is 64 bytes, over 63"},
		"a value a byte too long": {map[string]string{"k": strings.Repeat("v", wire.MaxLabelValueBytes+1)}, "the value is 257 bytes, over 256"},
		"a byte too many in all":  {manyLabels(wire.MaxLabels, wire.MaxLabelsBytes/wire.MaxLabels-4+1), "bytes in all, over 16384"},
		"an empty key":            {map[string]string{"": "v"}, "empty key"},
		"a control character":     {map[string]string{"k": "a\x1b[2Jb"}, "not printable"},
		"a newline in a key":      {map[string]string{"a\nb": "v"}, "not printable"},
		"invalid UTF-8":           {map[string]string{"k": "\xff"}, "not printable"},
	} {
		err := wire.CheckLabels(tc.labels)
		if !errors.Is(err, wire.ErrInvalidLabels) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", name, err, wire.ErrInvalidLabels, tc.says)
		}
	}
}

// FitLabels keeps labels within the limits as they are, and of labels over
// them those CheckLabel accepts, the first by key up to the limits.
func TestFitLabels(t *testing.T) {
	ok := map[string]string{"team": "a"}
	if got, cut := wire.FitLabels(ok); cut || !maps.Equal(got, ok) {
		t.Fatalf("labels within the limits: %v, cut %v", got, cut)
	}
	huge := map[string]string{"team": "a", "blob": strings.Repeat("x", 3<<20), "\x00": "nul"}
	if got, cut := wire.FitLabels(huge); !cut || !maps.Equal(got, map[string]string{"team": "a"}) {
		t.Fatalf("a 3 MiB label: %v, cut %v", got, cut)
	}
	many := manyLabels(wire.MaxLabels*2, wire.MaxLabelValueBytes)
	got, cut := wire.FitLabels(many)
	if !cut || wire.CheckLabels(got) != nil || got["k000"] == "" || len(got) == 0 {
		t.Fatalf("too many labels: %d kept, cut %v, %v", len(got), cut, wire.CheckLabels(got))
	}
	if got, cut := wire.FitLabels(map[string]string{"k": strings.Repeat("v", 1000)}); !cut || got != nil {
		t.Fatalf("only a label over the limits: %v, cut %v", got, cut)
	}
}
