// Package anthropic is the provider for Anthropic's Messages API (POST /v1/messages).
//
//	cfg := llm.DefaultConfig()
//	cfg.Provider, cfg.Model = llm.ProviderAnthropic, "claude-sonnet-4-5" // key from ANTHROPIC_API_KEY
//	p, err := anthropic.New(cfg)
//	...
//	resp, err := p.Stream(ctx, req, func(d llm.Delta) { fmt.Print(d.Text) })
//
// # Why net/http and not the official SDK
//
// github.com/anthropics/anthropic-sdk-go would bring its own retry loop, its own
// option system and a large generated dependency for the one endpoint TAH uses. The
// streaming events are few and documented (message_start, content_block_start,
// content_block_delta with text_delta / input_json_delta / thinking_delta,
// content_block_stop, message_delta, message_stop, ping, error); with net/http
// the retry rules are exactly those of llm/openai (package llm/httpx): Retry-After
// honoured, 529 "overloaded" retried, no silent restart of a stream that has
// already delivered text.
//
// # Mapping
//
//   - System messages (wherever they are) become the top-level "system" prompt,
//     joined by blank lines.
//   - An assistant message becomes a text block and one tool_use block per call.
//   - Tool results become tool_result blocks (is_error kept) in a user message;
//     consecutive tool results, and a user message that follows them, are merged
//     into one user message, as the API requires.
//   - max_tokens is required by the API: the request's, else the configuration's,
//     else 4096.
//   - stop_reason: end_turn and stop_sequence → stop, tool_use → tool_calls,
//     max_tokens and model_context_window_exceeded → length, refusal →
//     content_filter, anything else → other.
//   - Usage: InputTokens counts every input token (input_tokens plus
//     cache_read_input_tokens and cache_creation_input_tokens), so that it means the
//     same as OpenAI's prompt_tokens; CacheReadTokens is cache_read_input_tokens.
//     In a stream, input comes from message_start and output from message_delta.
//   - Thinking blocks become Response.Reasoning and Delta.Reasoning.
//   - Headers: x-api-key (never logged, never in an llm.Request) and
//     anthropic-version: 2023-06-01.
package anthropic
