package nodecmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/tah-dev/tah/wire"
)

// mcpBanner says, under the node's banner, where each MCP server of
// tools.mcp_config stands: its tools once it is served, "connecting" until
// then (the servers start in the background, node.MCPConfig; tahctl tools
// tells the same later).
func mcpBanner(w io.Writer, servers []wire.MCPServer, err error) {
	if err != nil {
		fmt.Fprintf(w, "  mcp      off: %v\n", err)
		return
	}
	for _, s := range servers {
		switch {
		case s.State == "serving":
			fmt.Fprintf(w, "  mcp      %s: %s\n", s.Name, strings.Join(s.Tools, ", "))
		case s.Failures > 0:
			fmt.Fprintf(w, "  mcp      %s: %s (%d failed attempts, retrying: %s)\n", s.Name, s.State, s.Failures, s.Error)
		default:
			fmt.Fprintf(w, "  mcp      %s: %s (its tools are offered once it is up; tahctl tools shows when)\n", s.Name, s.State)
		}
	}
}
