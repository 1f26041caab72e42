package mcp

import (
	"fmt"
	"strings"
)

// maxNameLen is the longest tool name every provider and NATS accept.
const maxNameLen = 64

// sep joins a server's name and its tool's.
const sep = "__"

// ToolName is the TAH name of tool of server: <server>__<tool>, with every
// character outside [A-Za-z0-9_-] of tool replaced by '_'. It fails when the
// name would be longer than 64 characters.
func ToolName(server, tool string) (string, error) {
	if tool == "" {
		return "", fmt.Errorf("server %s lists a tool without a name", server)
	}
	var b strings.Builder
	b.WriteString(server)
	b.WriteString(sep)
	for _, r := range tool {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() > maxNameLen {
		return "", fmt.Errorf("tool %q of server %s: its name %s has %d characters, over %d: give the server a shorter name", tool, server, b.String(), b.Len(), maxNameLen)
	}
	return b.String(), nil
}
