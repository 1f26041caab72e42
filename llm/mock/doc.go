// Package mock is TAH's built-in model: a product feature, not only a test double.
// It has two modes.
//
// # Scripted
//
// A script lists replies; each call is answered by the first reply, in order,
// that has uses left and whose conditions match (call number, turn = number of
// user messages, a substring or regular expression of the last user message,
// compaction or not). A reply is text (streamed word by word, or as given
// tokens), reasoning, tool calls, an error (a status and message that become a
// *llm.ProviderError, at once or after the text: a mid-stream error), with a
// delay, a pace between tokens and a hold before the end.
//
// The mock is strict, as a test double should be: it records every request it
// was sent (a deep copy, see Calls), a call that nothing matches is an error
// wrapping ErrUnexpectedCall that names the call number and the last user
// message (never a silent wrap-around), Done reports replies that were never
// used, and a request whose tool calls and results are not paired is refused as
// real providers refuse it (llm.ErrBadRequest, llm.ErrUnpaired).
//
//	p := mock.Scripted(
//		mock.CallTool("list_files", `{"path":"."}`).OnTurn(1),
//		mock.Say("The project has two directories.").OnTurn(1),
//		mock.Fail(429, "slow down").OnPrompt("again"),
//	)
//
// The same script as a file (mock.Load; durations as "15ms" or milliseconds):
//
//	{"pace": "20ms", "replies": [
//	  {"turn": 1, "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
//	  {"turn": 1, "text": "The project has two directories."},
//	  {"prompt": "again", "error": {"status": 429, "message": "slow down"}},
//	  {"prompt_regexp": "(?i)hello", "text": "Hi!", "times": -1}
//	]}
//
// # Demo (no script)
//
// Deterministic, a pure function of the request, so that `make demo` shows the
// whole loop without an API key:
//
//   - when the request offers the tools list_files and/or read_file (the
//     specification's example, "analyse this project's directory structure" or
//     "分析这个项目的目录结构", or any other prompt), it first calls list_files
//     with {"path":"."}; then, if the listing shows a README at the top level,
//     read_file with {"path":"README.md"} (the README's name as listed); then it
//     writes a summary of the project built from what the tools returned (the
//     top-level directories and files, counts, what kind of project it looks like,
//     the README's title and first paragraph), in the user's language (Chinese
//     when the prompt is), streamed token by token;
//   - without the built-ins it drives an MCP filesystem server's tools the same
//     way (@modelcontextprotocol/server-filesystem, bridged by tools/mcp as
//     fs__list_directory, say): list_directory, or a tool whose name ends in
//     __list_directory, with {"path":"."} (its "[DIR] name" / "[FILE] name"
//     lines read as a listing), then read_text_file or __read_text_file (else
//     the deprecated read_file, __read_file) with {"path":"README.md"}; paths
//     are relative, so the server must resolve them against the project (its
//     cwd). The structured copy of a result ({"content": the same text}) is
//     left out, and the analysis is the same, naming the tool it called;
//   - for a compaction request (CompactionMarker in a system message) it writes a
//     summary of its input: SummaryPrefix, a newline, then bullet points (the
//     previous summary's points, each turn's question, tools, tool errors and
//     answer);
//   - otherwise it answers with an echo of the prompt that says it is a demo.
//
// The mock does not run tools: the caller (the agent loop) runs them and sends
// their results back in the next request, as with a real model.
//
// Streaming pace: DefaultDemoPace (15ms) between tokens in demo mode, none when
// scripted; WithPace changes it. A cancelled context ends every wait at once.
package mock
