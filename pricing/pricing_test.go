package pricing_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

func TestCostOfACall(t *testing.T) {
	tab := pricing.Default()
	// gpt-4o-mini: 0.15 in, 0.075 cached, 0.6 out per million.
	u := llm.Usage{InputTokens: 1_000_000, CacheReadTokens: 400_000, OutputTokens: 100_000}
	got := tab.Cost("openai", "gpt-4o-mini", u)
	want := 0.6*0.15 + 0.4*0.075 + 0.1*0.6 // 0.09 + 0.03 + 0.06
	if got.USD != 0.18 || !got.Priced() {
		t.Fatalf("cost = %+v, want $0.18 priced (computed %v)", got, want)
	}
	// A dated snapshot shares its model's price.
	if c := tab.Cost("openai", "gpt-4o-mini-2024-07-18", u); c.USD != 0.18 {
		t.Fatalf("snapshot cost = %+v", c)
	}
	// gpt-4o-mini is not gpt-4o: the exact name wins over gpt-4o's snapshot glob.
	if c := tab.Cost("openai", "gpt-4o", llm.Usage{InputTokens: 1_000_000}); c.USD != 2.5 {
		t.Fatalf("gpt-4o = %+v", c)
	}
}

func TestNoPriceIsNeverMadeUp(t *testing.T) {
	tab := pricing.Default()
	for _, m := range []struct{ provider, model string }{
		{"openai", "llama3.1:8b"}, // Ollama behind the OpenAI protocol
		{"mock", "demo"},
		{"anthropic", "claude-unknown"},
		{"openai", ""},
	} {
		c := tab.Cost(m.provider, m.model, llm.Usage{InputTokens: 10, OutputTokens: 5})
		if c.USD != 0 || c.Unpriced != 1 || c.String() != "no price" {
			t.Errorf("%s %q: %+v %q, want no price", m.provider, m.model, c, c)
		}
	}
	if c := tab.Cost("mock", "demo", llm.Usage{}); !c.IsZero() {
		t.Errorf("a call of no token counts: %+v", c)
	}
}

func TestSumsStayExact(t *testing.T) {
	var total pricing.Cost
	p := pricing.Price{Provider: "x", Model: "m", Input: 0.1, Output: 0.2}
	for range 1000 {
		total = total.Add(p.Of(llm.Usage{InputTokens: 1000, OutputTokens: 1000})) // $0.0003 each
	}
	if total.USD != 0.3 {
		t.Fatalf("1000 × $0.0003 = %v", total.USD)
	}
	total = total.Add(pricing.Cost{Unpriced: 2})
	if got := total.String(); got != "$0.30 + 2 calls without a price" {
		t.Fatalf("String = %q", got)
	}
}

func TestFormatUSD(t *testing.T) {
	for x, want := range map[float64]string{0: "$0", 12.345: "$12.35", 1: "$1.00", 0.18: "$0.18", 0.000123456: "$0.0001235", 0.5: "$0.50", 0.0123: "$0.0123"} {
		if got := pricing.FormatUSD(x); got != want {
			t.Errorf("FormatUSD(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestFileOverridesAndExtendsTheDefaults(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "prices.json")
	os.WriteFile(name, []byte(`{"prices": [
		{"provider": "openai", "model": "gpt-4o-mini", "input": 1, "output": 2},
		{"provider": "openai", "model": "llama3*", "input": 0, "output": 0},
		{"provider": "mock", "model": "*", "input": 3, "cached_input": 1, "output": 6}
	]}`), 0o600)
	tab, err := pricing.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if c := tab.Cost("openai", "gpt-4o-mini", llm.Usage{InputTokens: 1_000_000}); c.USD != 1 {
		t.Errorf("the file's price wins: %+v", c)
	}
	if c := tab.Cost("openai", "gpt-4o", llm.Usage{InputTokens: 1_000_000}); c.USD != 2.5 {
		t.Errorf("the defaults stay: %+v", c)
	}
	if c := tab.Cost("openai", "llama3.1:8b", llm.Usage{InputTokens: 1000}); c.USD != 0 || !c.Priced() {
		t.Errorf("a free local model is priced at $0: %+v", c)
	}
	if c := tab.Cost("mock", "demo", llm.Usage{InputTokens: 2_000_000, CacheReadTokens: 1_000_000, OutputTokens: 500_000}); c.USD != 7 {
		t.Errorf("cached input at its own price: %+v", c)
	}

	os.WriteFile(name, []byte(`{"defaults": false, "prices": [{"provider": "mock", "model": "demo", "input": 1, "output": 1}]}`), 0o600)
	tab, err = pricing.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Lookup("openai", "gpt-4o"); ok {
		t.Error(`"defaults": false drops the defaults`)
	}
}

func TestBadTablesAreRefusedWithTheirFault(t *testing.T) {
	for name, data := range map[string]string{
		"malformed":     `{"prices": [`,
		"unknown field": `{"prices": [{"provider": "openai", "model": "x", "inptu": 1}]}`,
		"negative":      `{"prices": [{"provider": "openai", "model": "x", "input": -1}]}`,
		"bad glob":      `{"prices": [{"provider": "openai", "model": "x[", "input": 1}]}`,
		"no provider":   `{"prices": [{"model": "x", "input": 1}]}`,
		"two values":    `{} {}`,
	} {
		if _, err := pricing.Parse([]byte(data)); !errors.Is(err, pricing.ErrInvalidTable) {
			t.Errorf("%s: err = %v, want ErrInvalidTable", name, err)
		}
	}
	if _, err := pricing.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || errors.Is(err, pricing.ErrInvalidTable) {
		t.Errorf("a missing file: %v", err)
	}
}
