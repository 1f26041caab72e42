package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"strings"

	"github.com/tah-dev/tah/llm"
)

// ErrInvalidTable is wrapped by Load and Parse when a price table cannot be
// used: malformed JSON, an unknown field, a negative price, a bad glob.
var ErrInvalidTable = errors.New("invalid price table")

// Price is what one provider's model costs, in US dollars per million tokens.
type Price struct {
	// Provider is llm.Config's provider ("openai", "anthropic", "mock").
	Provider string `json:"provider"`
	// Model is the model's name or a glob of names (path.Match).
	Model string `json:"model"`
	// Input is the price of a million input tokens not read from the cache.
	Input float64 `json:"input"`
	// CachedInput is the price of a million input tokens read from the
	// provider's prompt cache; nil: the same as Input.
	CachedInput *float64 `json:"cached_input,omitempty"`
	// Output is the price of a million output tokens.
	Output float64 `json:"output"`
}

// Cost is what LLM calls cost, in US dollars.
type Cost struct {
	// USD is the cost of the priced calls.
	USD float64 `json:"usd"`
	// Unpriced counts the calls whose model has no price: their tokens are in
	// the usage beside the cost, not in USD.
	Unpriced int `json:"unpriced,omitempty"`
}

// Priced says whether every call counted has a price.
func (c Cost) Priced() bool { return c.Unpriced == 0 }

// IsZero says whether c counts no call at all (nothing priced, nothing
// unpriced).
func (c Cost) IsZero() bool { return c.USD == 0 && c.Unpriced == 0 }

// Add returns the sum of c and d.
func (c Cost) Add(d Cost) Cost {
	return Cost{USD: round(c.USD + d.USD), Unpriced: c.Unpriced + d.Unpriced}
}

// String is the cost as people read it: "$0.0123", "no price" when no call
// had one, "$0.0123 + 2 calls without a price" when some had none.
func (c Cost) String() string {
	switch {
	case c.Unpriced == 0:
		return FormatUSD(c.USD)
	case c.USD == 0:
		return "no price"
	case c.Unpriced == 1:
		return FormatUSD(c.USD) + " + 1 call without a price"
	default:
		return fmt.Sprintf("%s + %d calls without a price", FormatUSD(c.USD), c.Unpriced)
	}
}

// FormatUSD writes an amount with the digits that matter: cents for a dollar
// or more, four significant digits below, and never fewer than the cents
// ("$0.60", "$0.0123", "$0.0001235").
func FormatUSD(usd float64) string {
	switch {
	case usd == 0:
		return "$0"
	case math.Abs(usd) >= 1:
		return fmt.Sprintf("$%.2f", usd)
	default:
		s := fmt.Sprintf("%.*f", decimals(usd), usd)
		dot := strings.IndexByte(s, '.')
		for len(s) > dot+3 && s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		return "$" + s
	}
}

// decimals is how many decimals show four significant digits of |x| < 1.
func decimals(x float64) int {
	d := 3 - int(math.Floor(math.Log10(math.Abs(x))))
	return min(max(d, 2), 9)
}

// Of is what one call with usage u costs at p.
func (p Price) Of(u llm.Usage) Cost {
	cached := max(min(u.CacheReadTokens, u.InputTokens), 0)
	cachedPrice := p.Input
	if p.CachedInput != nil {
		cachedPrice = *p.CachedInput
	}
	usd := (float64(u.InputTokens-cached)*p.Input + float64(cached)*cachedPrice + float64(u.OutputTokens)*p.Output) / 1e6
	return Cost{USD: round(usd)}
}

// round keeps nano-dollars: what float sums add below that is noise.
func round(usd float64) float64 { return math.Round(usd*1e9) / 1e9 }

// Table is a set of prices. The zero Table prices nothing.
type Table struct {
	prices []Price // the file's first, then the defaults
}

// Lookup finds the price of provider's model: the entry that names it
// exactly, else the longest glob that matches it; entries added later
// (a file's) before earlier ones (the defaults) when equally good.
func (t *Table) Lookup(provider, model string) (Price, bool) {
	if t == nil || model == "" {
		return Price{}, false
	}
	best, found, bestLen := Price{}, false, -1
	for _, p := range t.prices {
		if p.Provider != provider {
			continue
		}
		if p.Model == model {
			return p, true
		}
		if ok, _ := path.Match(p.Model, model); ok && len(p.Model) > bestLen {
			best, found, bestLen = p, true, len(p.Model)
		}
	}
	return best, found
}

// Cost is what one call of provider's model with usage u costs; a call of a
// model without a price counts in Unpriced (and a call that used no token
// costs nothing either way).
func (t *Table) Cost(provider, model string, u llm.Usage) Cost {
	if u == (llm.Usage{}) {
		return Cost{}
	}
	p, ok := t.Lookup(provider, model)
	if !ok {
		return Cost{Unpriced: 1}
	}
	return p.Of(u)
}

// Prices lists the table's entries, the file's before the defaults.
func (t *Table) Prices() []Price {
	if t == nil {
		return nil
	}
	return append([]Price(nil), t.prices...)
}

// file is a price table file's shape.
type file struct {
	// Defaults keeps the default prices under the file's (true when absent).
	Defaults *bool   `json:"defaults,omitempty"`
	Prices   []Price `json:"prices"`
}

// Load reads a price table file (the format of the package doc). An empty
// path is the default table.
func Load(name string) (*Table, error) {
	if name == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// Parse reads a price table from its JSON.
func Parse(data []byte) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrInvalidTable)
	}
	for i, p := range f.Prices {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("%w: prices[%d] (%s %q): %w", ErrInvalidTable, i, p.Provider, p.Model, err)
		}
	}
	t := &Table{prices: append([]Price(nil), f.Prices...)}
	if f.Defaults == nil || *f.Defaults {
		t.prices = append(t.prices, defaults...)
	}
	return t, nil
}

func (p Price) validate() error {
	switch {
	case p.Provider == "":
		return errors.New("provider is empty")
	case p.Model == "":
		return errors.New("model is empty")
	case !valid(p.Input) || !valid(p.Output) || (p.CachedInput != nil && !valid(*p.CachedInput)):
		return errors.New("a price is negative or not a number")
	}
	if _, err := path.Match(p.Model, ""); err != nil {
		return fmt.Errorf("model glob: %w", err)
	}
	return nil
}

func valid(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
