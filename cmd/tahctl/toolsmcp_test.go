package main

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/wire"
)

// TestToolsMCPServers: tahctl tools says which MCP servers are not served
// yet (connecting, with their failed attempts) or restarting; a served one
// is in the table already.
func TestToolsMCPServers(t *testing.T) {
	var b strings.Builder
	mcpServers(&b, []wire.MCPServer{{Name: "fs", State: "connecting"}, {Name: "good", State: "serving", Tools: []string{"good__a"}},
		{Name: "web", State: "restarting", Failures: 2, Error: "exit status 1"}})
	want := "MCP server fs: connecting; its tools are listed once it is up\nMCP server web: restarting (2 failed attempts, retrying: exit status 1)\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
