// Package openai is the provider for the OpenAI Chat Completions API and for every
// server that speaks it: OpenAI itself, Ollama (http://localhost:11434/v1), vLLM,
// llama.cpp's server, LM Studio, OpenRouter and the like.
//
//	cfg := llm.DefaultConfig()
//	cfg.Provider, cfg.Model = llm.ProviderOpenAI, "gpt-4o-mini" // key from OPENAI_API_KEY
//	p, err := openai.New(cfg)
//	...
//	resp, err := p.Stream(ctx, req, func(d llm.Delta) { fmt.Print(d.Text) })
//
// For a local server, set cfg.BaseURL (e.g. "http://localhost:11434/v1"); the API
// key is then optional.
//
// # Why net/http and not the official SDK
//
// The official SDK (github.com/openai/openai-go/v3) targets OpenAI's own API and
// follows it closely; this package must also work with compatible servers that
// differ in small ways (no index on streamed tool calls, "reasoning" or
// "reasoning_content" for visible thinking, errors as {"error":"text"}, finish
// reason "stop" beside tool calls). It also needs exact control of retries: the
// same rules as llm/anthropic (package llm/httpx), Retry-After honoured, no silent
// restart of a stream that has already delivered text. A few hundred lines of
// net/http and a small SSE reader do all of that with no dependency.
//
// # Behaviour
//
//   - Stream sends "stream": true with "stream_options": {"include_usage": true}, and
//     assembles tool calls from their deltas by index (parallel calls included);
//     Generate sends a non-streamed request.
//   - finish_reason maps to llm.FinishReason; a "stop" with tool calls is reported
//     as FinishToolCalls.
//   - reasoning_content (vLLM, DeepSeek) or reasoning (Ollama) becomes
//     Response.Reasoning and Delta.Reasoning.
//   - Usage: prompt_tokens (cached ones included) → InputTokens,
//     completion_tokens → OutputTokens, prompt_tokens_details.cached_tokens →
//     CacheReadTokens.
//   - The output limit is sent as max_completion_tokens to api.openai.com and as
//     max_tokens to every other server (the field compatible servers know).
//   - Tool results marked IsError are sent as they are: Chat Completions has no
//     error flag for them.
//   - Retries, timeouts, cancellation and errors: see llm/httpx. The API key is sent
//     in the Authorization header only, is never logged, and is never part of an
//     llm.Request.
package openai
