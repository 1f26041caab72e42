package mock

import (
	"strings"

	"github.com/tah-dev/tah/llm"
)

// The MCP filesystem server's tools the demo calls when the built-ins are not
// offered, by their names on the server: a bridge serves them as
// <server>__<name> (fs__list_directory).
const (
	mcpListDirectory = "list_directory"
	mcpReadTextFile  = "read_text_file"
)

// chosenTools names the tools the demo calls in a request; "" when the request
// offers none for that step.
type chosenTools struct {
	list, read string
}

// pickTools chooses, from the tools req offers, the built-ins list_files and
// read_file first; without them, an MCP filesystem server's list_directory and
// read_text_file (or its deprecated read_file), bare or as <server>__<name>.
func pickTools(offered []llm.ToolSchema) chosenTools {
	names := make([]string, len(offered))
	for i, t := range offered {
		names[i] = t.Name
	}
	return chosenTools{
		list: builtinOrMCP(names, ToolListFiles, mcpListDirectory),
		read: builtinOrMCP(names, ToolReadFile, mcpReadTextFile, ToolReadFile),
	}
}

// builtinOrMCP returns builtin when names holds it; else the first of names
// that is one of mcpNames (in their order of preference), bare or bridged as
// <server>__<name>; else "".
func builtinOrMCP(names []string, builtin string, mcpNames ...string) string {
	for _, n := range names {
		if n == builtin {
			return n
		}
	}
	for _, m := range mcpNames {
		for _, n := range names {
			if n == m || strings.HasSuffix(n, "__"+m) {
				return n
			}
		}
	}
	return ""
}
