// Package pricing gives an LLM call a cost: a price table (per provider and
// model, US dollars per million input, cached input and output tokens) and the
// arithmetic from an llm.Usage to a Cost.
//
// A model the table does not price has no cost, never a guessed one: Cost
// counts such calls in Unpriced, and every reader shows "no price" for them
// beside their usage. The default table (Default) prices the common OpenAI
// and Anthropic models at their published list prices on the date named by
// DefaultsAsOf; a file (Load) adds to it or replaces it:
//
//	{
//	  "defaults": true,
//	  "prices": [
//	    {"provider": "openai", "model": "gpt-4o-mini", "input": 0.15, "cached_input": 0.075, "output": 0.6},
//	    {"provider": "openai", "model": "my-finetune-*", "input": 0.3, "output": 1.2}
//	  ]
//	}
//
// A model is a name or a glob (path.Match: `*`, `?`, `[...]`); the exact name
// wins over a glob, and a longer glob over a shorter one; a file's entry over
// a default one. "cached_input" is the price of input tokens read from the
// provider's prompt cache (llm.Usage.CacheReadTokens, which InputTokens
// includes); absent, they cost what other input tokens cost.
//
// Amounts are float64 dollars rounded to the nano-dollar: exact enough for
// any bill (a token costs at least a few nano-dollars), and readable on the
// wire as a plain JSON number.
package pricing
