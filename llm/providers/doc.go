// Package providers builds the llm.Provider that an llm.Config names. It is apart
// from package llm so that llm imports no provider (the providers import llm).
//
//	cfg := llm.DefaultConfig() // the mock, in demo mode
//	cfg.Provider, cfg.Model = llm.ProviderOpenAI, "gpt-4o-mini"
//	cfg.BaseURL = "http://localhost:11434/v1" // Ollama; empty for api.openai.com
//	p, err := providers.New(cfg)
//	...
//	resp, err := llm.Run(ctx, p, req, func(d llm.Delta) { fmt.Print(d.Text) })
package providers
