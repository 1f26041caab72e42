package mock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
)

// The tools of @modelcontextprotocol/server-filesystem as tools/mcp bridges
// them from a server named fs.
var fsTools = []llm.ToolSchema{
	{Name: "fs__read_file"}, {Name: "fs__read_text_file"}, {Name: "fs__write_file"},
	{Name: "fs__list_directory"}, {Name: "fs__directory_tree"},
}

// mcpResult is a filesystem server's result as the bridge passes it on:
// its text block (the structured content {"content": the same text} that
// the server adds is not repeated: tools/mcp's TestStructuredContentNotRepeated).
func mcpResult(text string) string { return text }

// demoStep asks the demo for its next step after the calls so far, each
// answered by results[name].
func demoStep(t *testing.T, prompt string, offered []llm.ToolSchema, calls []llm.ToolCall, results map[string]string) llm.Response {
	t.Helper()
	msgs := []llm.Message{llm.User(prompt)}
	for i, c := range calls {
		c.ID = "c" + string(rune('1'+i))
		msgs = append(msgs, llm.Assistant("", c), llm.ToolResult(c, results[c.Name], false))
	}
	r, err := mock.Demo(mock.WithPace(0)).Generate(context.Background(), llm.Request{Tools: offered, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDemoOverTheMCPFilesystemServer(t *testing.T) {
	results := map[string]string{
		"fs__list_directory": mcpResult("[DIR] cmd\n[DIR] docs\n[FILE] Makefile\n[FILE] README.md\n[FILE] go.mod"),
		"fs__read_text_file": mcpResult("# Demo Project\n\nDemo Project shows how an agent\nreads a repository.\n"),
	}
	var calls []llm.ToolCall
	for _, want := range []string{`fs__list_directory {"path":"."}`, `fs__read_text_file {"path":"README.md"}`} {
		r := demoStep(t, "analyse this project's directory structure", fsTools, calls, results)
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name+" "+string(r.ToolCalls[0].Arguments) != want {
			t.Fatalf("step %d = %+v, want the call %s", len(calls)+1, r, want)
		}
		calls = append(calls, r.ToolCalls[0])
	}
	answer := demoStep(t, "analyse this project's directory structure", fsTools, calls, results).Content
	for _, want := range []string{
		"I listed the project with `fs__list_directory` and read `README.md`.",
		"The top level holds 5 entries: 2 directories and 3 files.",
		"Directories: `cmd/`, `docs/`",
		"Files: `Makefile`, `README.md`, `go.mod`",
		"Title: Demo Project",
		`It begins: "Demo Project shows how an agent reads a repository."`,
	} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer lacks %q:\n%s", want, answer)
		}
	}

	zh := demoStep(t, "分析这个项目的目录结构", fsTools, calls, results).Content
	if !strings.Contains(zh, "我用 `fs__list_directory` 查看了项目的目录结构，并读了 `README.md`。") {
		t.Errorf("the Chinese answer:\n%s", zh)
	}
}

// The demo calls the built-ins when they are offered beside an MCP server's
// tools, and a server's deprecated read_file when it has no read_text_file.
func TestDemoChoosesItsTools(t *testing.T) {
	for name, tc := range map[string]struct {
		offered []llm.ToolSchema
		want    string
	}{
		"built-ins first":    {append(append([]llm.ToolSchema{}, fsTools...), demoTools...), "list_files"},
		"bare MCP names":     {[]llm.ToolSchema{{Name: "list_directory"}}, "list_directory"},
		"read_text_file":     {[]llm.ToolSchema{{Name: "fs__read_file"}, {Name: "fs__read_text_file"}}, "fs__read_text_file"},
		"deprecated read":    {[]llm.ToolSchema{{Name: "docs__read_file"}}, "docs__read_file"},
		"no tool it knows":   {[]llm.ToolSchema{{Name: "fs__directory_tree"}}, ""},
		"not a bridged name": {[]llm.ToolSchema{{Name: "xlist_directory"}}, ""},
	} {
		r := demoStep(t, "analyse", tc.offered, nil, nil)
		got := ""
		if len(r.ToolCalls) > 0 {
			got = r.ToolCalls[0].Name
		}
		if got != tc.want {
			t.Errorf("%s: the demo calls %q, want %q", name, got, tc.want)
		}
	}
}
