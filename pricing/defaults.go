package pricing

// DefaultsAsOf is when the default prices were the providers' list prices.
// Prices change: a deployment that bills from these figures should keep its
// own table (Load) and set "defaults": false.
const DefaultsAsOf = "2025-11"

// Default is the table of the default prices alone.
func Default() *Table { return &Table{prices: append([]Price(nil), defaults...)} }

func usd(x float64) *float64 { return &x }

// defaults are the OpenAI and Anthropic list prices (standard tier, US
// dollars per million tokens) of DefaultsAsOf. Dated snapshots share their
// model's price through a glob.
var defaults = []Price{
	// OpenAI
	{Provider: "openai", Model: "gpt-5", Input: 1.25, CachedInput: usd(0.125), Output: 10},
	{Provider: "openai", Model: "gpt-5-20*", Input: 1.25, CachedInput: usd(0.125), Output: 10},
	{Provider: "openai", Model: "gpt-5-mini", Input: 0.25, CachedInput: usd(0.025), Output: 2},
	{Provider: "openai", Model: "gpt-5-mini-20*", Input: 0.25, CachedInput: usd(0.025), Output: 2},
	{Provider: "openai", Model: "gpt-5-nano", Input: 0.05, CachedInput: usd(0.005), Output: 0.4},
	{Provider: "openai", Model: "gpt-5-nano-20*", Input: 0.05, CachedInput: usd(0.005), Output: 0.4},
	{Provider: "openai", Model: "gpt-4.1", Input: 2, CachedInput: usd(0.5), Output: 8},
	{Provider: "openai", Model: "gpt-4.1-20*", Input: 2, CachedInput: usd(0.5), Output: 8},
	{Provider: "openai", Model: "gpt-4.1-mini", Input: 0.4, CachedInput: usd(0.1), Output: 1.6},
	{Provider: "openai", Model: "gpt-4.1-mini-20*", Input: 0.4, CachedInput: usd(0.1), Output: 1.6},
	{Provider: "openai", Model: "gpt-4.1-nano", Input: 0.1, CachedInput: usd(0.025), Output: 0.4},
	{Provider: "openai", Model: "gpt-4.1-nano-20*", Input: 0.1, CachedInput: usd(0.025), Output: 0.4},
	{Provider: "openai", Model: "gpt-4o", Input: 2.5, CachedInput: usd(1.25), Output: 10},
	{Provider: "openai", Model: "gpt-4o-20*", Input: 2.5, CachedInput: usd(1.25), Output: 10},
	{Provider: "openai", Model: "gpt-4o-mini", Input: 0.15, CachedInput: usd(0.075), Output: 0.6},
	{Provider: "openai", Model: "gpt-4o-mini-20*", Input: 0.15, CachedInput: usd(0.075), Output: 0.6},
	{Provider: "openai", Model: "o3", Input: 2, CachedInput: usd(0.5), Output: 8},
	{Provider: "openai", Model: "o3-20*", Input: 2, CachedInput: usd(0.5), Output: 8},
	{Provider: "openai", Model: "o4-mini", Input: 1.1, CachedInput: usd(0.275), Output: 4.4},
	{Provider: "openai", Model: "o4-mini-20*", Input: 1.1, CachedInput: usd(0.275), Output: 4.4},
	// Anthropic (cache reads at a tenth of the input price; cache writes,
	// which Usage does not count apart, at the input price)
	{Provider: "anthropic", Model: "claude-opus-4-5*", Input: 5, CachedInput: usd(0.5), Output: 25},
	{Provider: "anthropic", Model: "claude-opus-4-1*", Input: 15, CachedInput: usd(1.5), Output: 75},
	{Provider: "anthropic", Model: "claude-opus-4-0", Input: 15, CachedInput: usd(1.5), Output: 75},
	{Provider: "anthropic", Model: "claude-opus-4-20*", Input: 15, CachedInput: usd(1.5), Output: 75},
	{Provider: "anthropic", Model: "claude-sonnet-4-5*", Input: 3, CachedInput: usd(0.3), Output: 15},
	{Provider: "anthropic", Model: "claude-sonnet-4-0", Input: 3, CachedInput: usd(0.3), Output: 15},
	{Provider: "anthropic", Model: "claude-sonnet-4-20*", Input: 3, CachedInput: usd(0.3), Output: 15},
	{Provider: "anthropic", Model: "claude-3-7-sonnet*", Input: 3, CachedInput: usd(0.3), Output: 15},
	{Provider: "anthropic", Model: "claude-haiku-4-5*", Input: 1, CachedInput: usd(0.1), Output: 5},
	{Provider: "anthropic", Model: "claude-3-5-haiku*", Input: 0.8, CachedInput: usd(0.08), Output: 4},
}
