package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/tah-dev/tah/wire"
)

// runTools is `tahctl tools`.
func runTools(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("tools", "[--tenant NAME]", "Lists the tools the node offers to the model: its own and those of tool services on NATS\n"+
		"(with a tenant's credential, or --tenant, those a tenant's sessions are offered: its own tools too).\n"+
		"APPROVAL says which calls wait for a person's approval before they run (the node's\n"+
		"tools.approval, --tools-approval): tahctl send asks on a terminal; tahctl approve decides.")
	tenant := fs.String("tenant", "", "the tools tenant `NAME`'s sessions are offered")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("`tahctl tools`", "tools takes no arguments, got %q", pos[0])
	}
	if err := checkTenant(*tenant, ""); err != nil {
		return err
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var r wire.ToolsReply
	if *tenant != "" {
		r, err = c.ToolsOf(ctx, *tenant)
	} else {
		r, err = c.Tools(ctx)
	}
	if err != nil {
		return c.failed(wire.EndpointTools, err)
	}
	if g.json {
		return printJSON(g.stdout, r)
	}
	if len(r.Tools) == 0 {
		fmt.Fprintln(g.stdout, "the node offers no tools")
		mcpServers(g.stdout, r.MCPServers)
		return nil
	}
	st := newStyle(g, g.stdout)
	asks := map[string]bool{}
	for _, name := range r.Approval {
		asks[name] = true
	}
	var t table
	t.add(cell{"TOOL", st.bold}, cell{"APPROVAL", st.bold}, cell{"INPUT", st.bold}, cell{"DESCRIPTION", st.bold})
	for _, tool := range r.Tools {
		approval := plain("-")
		if asks[tool.Name] {
			approval = cell{"required", st.yellow}
		}
		t.add(plain(tool.Name), approval, plain(inputNames(tool.InputSchema)), plain(oneLine(tool.Description, 80)))
	}
	if err := t.write(g.stdout); err != nil {
		return err
	}
	mcpServers(g.stdout, r.MCPServers)
	return nil
}

// mcpServers says where the node's MCP servers that are not served stand:
// one still connecting (its tools are listed once it is up; a turn begun
// meanwhile waits for it a while) or restarting.
func mcpServers(w io.Writer, servers []wire.MCPServer) {
	for _, s := range servers {
		if s.State == "serving" {
			continue
		}
		line := fmt.Sprintf("MCP server %s: %s", s.Name, s.State)
		if s.Failures > 0 {
			line += fmt.Sprintf(" (%d failed attempts, retrying: %s)", s.Failures, oneLine(s.Error, 100))
		}
		if s.State == "connecting" {
			line += "; its tools are listed once it is up"
		}
		fmt.Fprintln(w, line)
	}
}

// inputNames lists the properties of a tool's input schema, required ones first.
func inputNames(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "-"
	}
	req := map[string]bool{}
	out := ""
	for _, r := range s.Required {
		req[r] = true
		if _, ok := s.Properties[r]; ok {
			out += r + " "
		}
	}
	var opt []string
	for name := range s.Properties {
		if !req[name] {
			opt = append(opt, name)
		}
	}
	sort.Strings(opt)
	for _, o := range opt {
		out += "[" + o + "] "
	}
	return oneLine(out, 50)
}
