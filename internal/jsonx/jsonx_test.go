package jsonx

import (
	"encoding/json"
	"math"
	"testing"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "s_abc", "llm.started", "a \"quoted\" \\ word", "line\nbreak\t\r\b\f\x00\x1f\x7f", "<b>&amp;</b>",
		"héllo ✓ 日本", "\xff\xfe bad", "\u2028 and \u2029", "\xe2\x80", "trailing \xc3", "emoji 🙂 \U0010ffff", "\xed\xa0\x80 surrogate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.001234567, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e21, 1e100,
		-2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		want, err := json.Marshal(v)
		got, ok := AppendFloat([]byte("x"), v)
		if err != nil {
			if ok {
				t.Fatalf("AppendFloat(%v) = %s, Marshal refuses it: %v", v, got, err)
			}
			return
		}
		if !ok || string(got) != "x"+string(want) {
			t.Fatalf("AppendFloat(%v) = %s (ok %v), want x%s", v, got, ok, want)
		}
	})
}

func TestAppendFloatRefusesWhatMarshalRefuses(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, ok := AppendFloat(nil, v); ok {
			t.Errorf("AppendFloat(%v) ok, Marshal refuses it", v)
		}
	}
}
