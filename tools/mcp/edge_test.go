package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// edgeServerEnv, set to a directory, makes the test binary an MCP server on
// stdio with tools for the edge cases; it leaves marks in that directory.
const edgeServerEnv = "TAH_MCP_EDGE_SERVER"

// floodServerEnv, set, makes the test binary an MCP server on stdio that
// writes 20 MB to its stderr as it starts (runFloodServer).
const floodServerEnv = "TAH_MCP_FLOOD_SERVER"

// floodBytes is what the flood server writes to its stderr: half in lines
// of 97 bytes, half in one line.
const floodBytes = 20 << 20

// runFloodServer serves the tools hello and flooded (which answers once
// the whole flood is written) while it writes floodBytes to its stderr.
func runFloodServer() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := bytes.Repeat(append(bytes.Repeat([]byte("flood "), 16), '\n'), 1000)
		for n := 0; n < floodBytes/2; n += len(chunk) {
			_, _ = os.Stderr.Write(chunk)
		}
		long := bytes.Repeat([]byte("x"), 1<<20)
		for range floodBytes / 2 / len(long) {
			_, _ = os.Stderr.Write(long)
		}
		_, _ = os.Stderr.Write([]byte("\n"))
	}()
	s := sdk.NewServer(&sdk.Implementation{Name: "flood", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&sdk.Tool{Name: "hello", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("hello"), nil
	})
	s.AddTool(&sdk.Tool{Name: "flooded", InputSchema: obj}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		<-done
		return text("flooded"), nil
	})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func mark(dir, name string) { _ = os.WriteFile(filepath.Join(dir, name), nil, 0o600) }

func runEdgeServer(dir string) {
	s := sdk.NewServer(&sdk.Implementation{Name: "edge", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	add := func(name string, schema any, h sdk.ToolHandler) {
		s.AddTool(&sdk.Tool{Name: name, Description: "the " + name + " tool", InputSchema: schema}, h)
	}
	add("echo", map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(r.Params.Arguments, &in)
			return text("echo: " + in.Text), nil
		})
	add("fails", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res := text("it failed on purpose")
		res.IsError = true
		return res, nil
	})
	add("image", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "here it is"},
			&sdk.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}},
			StructuredContent: map[string]any{"pixels": 4}}, nil
	})
	add("slow", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		mark(dir, "slow-started")
		<-ctx.Done()
		mark(dir, "slow-cancelled")
		return nil, ctx.Err()
	})
	add("die", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	add("grow", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		add("grown", obj, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("grown"), nil
		})
		return text("added the tool grown"), nil // the server sends notifications/tools/list_changed
	})
	add("bad", map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 12}}}, nil)
	add("dup.name", obj, nil)
	add("dup_name", obj, nil)
	add(strings.Repeat("x", 61), obj, nil)
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}
