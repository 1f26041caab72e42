package mcp

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Structured content that only wraps the text (the filesystem server's
// {"content": <its text>}) is not sent to the model a second time; content
// of its own is, after the text.
func TestStructuredContentNotRepeated(t *testing.T) {
	text := "[FILE] README.md\n[DIR] src"
	wrapped := toResult(context.Background(), &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: map[string]any{"content": text}})
	if wrapped.Output != text {
		t.Errorf("wrapped text: %q, want the text once", wrapped.Output)
	}
	own := toResult(context.Background(), &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: "2 files"}}, StructuredContent: map[string]any{"count": 2}})
	if own.Output != "2 files\n{\"count\":2}" {
		t.Errorf("structured content of its own: %q", own.Output)
	}
}
