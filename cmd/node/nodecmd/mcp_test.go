package nodecmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tah-dev/tah/wire"
)

// fakeServerEnv, set, makes the test binary an MCP server on stdio
// (runFakeServer) with the one tool hello, read-only. (The bridge's own
// behaviour is tested in node and tools/mcp.)
const fakeServerEnv = "TAH_NODECMD_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeServerEnv) != "" {
		runFakeServer()
		return
	}
	os.Exit(m.Run())
}

func runFakeServer() {
	s := sdk.NewServer(&sdk.Implementation{Name: "good", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "hello", Description: "answers hello", InputSchema: map[string]any{"type": "object"},
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"}}}, nil
		})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// mcpFile writes an {"mcpServers": ...} file of the fake server under the
// name good, and returns its path.
func mcpFile(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"good": map[string]any{"command": exe, "env": map[string]string{fakeServerEnv: "1"}}}})
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMCPBanner: the banner shows an MCP server as connecting until it is
// up (with its failed attempts, if any), and its tools then; a bridge that
// does not run says why.
func TestMCPBanner(t *testing.T) {
	var b strings.Builder
	mcpBanner(&b, []wire.MCPServer{{Name: "fs", State: "connecting"}, {Name: "good", State: "serving", Tools: []string{"good__a", "good__b"}},
		{Name: "web", State: "connecting", Failures: 2, Error: "exit status 1"}}, nil)
	for _, want := range []string{"  mcp      fs: connecting (its tools are offered once it is up", "  mcp      good: good__a, good__b\n",
		"  mcp      web: connecting (2 failed attempts, retrying: exit status 1)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the banner lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	mcpBanner(&b, nil, errors.New("connect refused"))
	if b.String() != "  mcp      off: connect refused\n" {
		t.Fatalf("off: %q", b.String())
	}
}
