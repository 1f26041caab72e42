package session

import (
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// The cost of an LLM call is computed here, once, by the node that made the
// call, and recorded with its usage (llm.completed, or the compaction's
// event): every reader then agrees on it, whatever prices it has, and a
// later change of the prices does not rewrite what was spent.

// prices is the node's price table: Config.Prices, or the default one.
func (c Config) prices() *pricing.Table {
	if c.Prices == nil {
		return defaultPrices
	}
	return c.Prices
}

// defaultPrices is built once: every session of a node without a table of
// its own shares it (a Table is only read).
var defaultPrices = pricing.Default()

// cost is what one call, asked with req and answered by resp, cost at the
// node's prices: the price of the model that answered, as the provider
// names it (a dated snapshot shares its model's price through a glob), or
// of the one asked for when the answer names none. Never the asked model's
// price for an answer of another model: that would be a guess. nil for a
// call that used no token: nothing to record.
func (a *AgentContext) cost(req llm.Request, resp llm.Response) *pricing.Cost {
	if resp.Usage == (llm.Usage{}) {
		return nil
	}
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	if model == "" {
		model = a.Config.Model
	}
	c := a.Config.prices().Cost(providerName(a.Provider), model, resp.Usage)
	return &c
}
