// Package llm holds the values that TAH exchanges with a language model, and the
// Provider interface that every model backend implements.
//
// Everything here is a plain value that round-trips through JSON: a Request is
// recorded, as it was sent, in the LLM step of the session's event log, so that a
// step can be inspected, billed and replayed. Nothing in this package does I/O;
// providers live in sub-packages (llm/mock, llm/openai, llm/anthropic), each of
// which asserts at compile time that it implements Provider:
//
//	var _ llm.Provider = (*Provider)(nil)
//
// Streaming is an optional ability, found by type assertion:
//
//	if s, ok := p.(llm.Streamer); ok {
//		resp, err = s.Stream(ctx, req, func(d llm.Delta) { fmt.Print(d.Text) })
//	} else {
//		resp, err = p.Generate(ctx, req)
//	}
//
// A session sends its whole history again with every request. A Memo, carried by
// the request's context (WithMemo), keeps what a provider encoded of it from one
// request to the next, so that a request's body costs what the step added rather
// than the whole history: llm/openai and llm/anthropic take it up, and write the
// same bytes with it as without.
//
// A provider's errors may quote what the server wrote back, and some servers
// repeat the request's credentials there: Redact (and RedactError) remove the
// configured keys and credential-shaped values from text before it is recorded,
// printed or logged (docs/security.md, "What is redacted").
//
// The smallest use, without a provider:
//
//	req := llm.Request{Messages: []llm.Message{
//		llm.System("You are a helpful agent."),
//		llm.User("analyse this project's directory structure"),
//	}}
package llm
