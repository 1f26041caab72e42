package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/tah-dev/tah/wire"
)

// Errors of LoadConfig and ParseConfig.
var (
	// ErrConfig is wrapped by every error of a configuration file.
	ErrConfig = errors.New("invalid MCP configuration")
)

// Config is the file users already have for Claude Desktop, Claude Code or
// Cursor: {"mcpServers": {"name": {...}}}. Other top-level keys are ignored.
type Config struct {
	Servers map[string]ServerConfig `json:"mcpServers"`
}

// ServerConfig is one MCP server: a command run with stdio (Command, Args,
// Env, Cwd) or a Streamable HTTP endpoint (URL, Headers).
type ServerConfig struct {
	// Type is "stdio", "http" or "streamable-http"; empty chooses by Command
	// or URL. "sse" (the older transport) is refused.
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Disabled servers are skipped.
	Disabled bool `json:"disabled,omitempty"`
}

// stdio reports whether the server runs as a command.
func (s ServerConfig) stdio() bool { return s.URL == "" }

// LoadConfig reads and checks the file at path.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads and checks a configuration.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if len(c.Servers) == 0 {
		return Config{}, fmt.Errorf(`%w: no servers: write {"mcpServers": {"name": {"command": ..., "args": [...]}}}`, ErrConfig)
	}
	for _, name := range c.names() {
		if err := c.Servers[name].check(name); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// ToolGrants are what a tool credential that serves c's enabled servers
// names: "<server>__*" for each, which grants every tool of the server's
// namespace (wire.ToolNamespaceGrant), whatever tools it lists, now or
// later. Sorted.
func (c Config) ToolGrants() []string {
	var out []string
	for _, name := range c.names() {
		out = append(out, wire.ToolNamespaceGrant(name))
	}
	return out
}

// names returns the enabled servers' names, sorted.
func (c Config) names() []string {
	var out []string
	for name, s := range c.Servers {
		if !s.Disabled {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (s ServerConfig) check(name string) error {
	// A server's name is the namespace of its tools: letters, digits and
	// '-', in words joined by single '_'. With no "__" inside and no '_' at
	// either end, the first "__" of a tool's name is the one after its
	// server: tools of two servers cannot collide.
	if wire.ValidToolNamespace(name) != nil || len(name) > maxNameLen-4 {
		return fmt.Errorf("%w: server name %q: use letters, digits, '-' and single '_', not \"cancel\" (its tools are named <server>__<tool>)", ErrConfig, name)
	}
	switch strings.ToLower(s.Type) {
	case "", "stdio", "http", "streamable-http", "streamablehttp":
	case "sse":
		return fmt.Errorf("%w: server %s: the SSE transport is not supported; use its Streamable HTTP endpoint", ErrConfig, name)
	default:
		return fmt.Errorf("%w: server %s: type %q: want stdio, http or streamable-http", ErrConfig, name, s.Type)
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("%w: server %s: give a command (stdio) or a url (Streamable HTTP)", ErrConfig, name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("%w: server %s: give a command or a url, not both", ErrConfig, name)
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: server %s: url %q: want http(s)://host/path", ErrConfig, name, s.URL)
		}
	}
	return nil
}
