package wire_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tah-dev/tah/wire"
)

func TestToolNamespaces(t *testing.T) {
	for got, want := range map[string]string{
		wire.ToolNamespaceGrant("fs"):                                 "fs__*",
		wire.NamespaceToolSubject("fs", "read_text_file"):             "tah.tool.fs.read_text_file",
		wire.NamespaceToolSubjects("fs"):                              "tah.tool.fs.*",
		wire.ToolNamespaceService("fs"):                               "tah-tools-fs",
		wire.NamespaceResultKey("fs", "read", "s_1", "a.b"):           "ns=fs.read.s_1.=YS5i",
		wire.NamespaceResultKey("fs", "read", "", "c1"):               "ns=fs.read._.c1",
		wire.NamespaceResultKeyFilter("s_1", "c1"):                    "*.*.s_1.c1",
		wire.NamespaceResultSubjects("fs"):                            "$KV.tah_tool_results.ns=fs.>",
		wire.CallResultKey("tah-tools-fs", "fs__read", "s", "c"):      "ns=fs.read.s.c",
		wire.CallResultKey("tah-tool-fs__read", "fs__read", "s", "c"): "fs__read.s.c",
		wire.CallResultKey("tah-tools-fs", "api__read", "s", "c"):     "api__read.s.c",
		wire.CallResultKey("", "shout", "s", "c"):                     "shout.s.c",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	for _, tc := range []struct{ name, ns, tool string }{
		{"fs__read_text_file", "fs", "read_text_file"},
		{"my_srv__a__b", "my_srv", "a__b"},
		{"a___b", "a", "_b"},
		{"a-b__c", "a-b", "c"},
		{"shout", "", ""},
		{"fs__", "", ""},
		{"_x__y", "", ""},
		{"cancel__x", "", ""},
		{"fs__a.b", "", ""},
		{"fs__" + strings.Repeat("x", 61), "", ""},
	} {
		ns, tool, ok := wire.SplitToolName(tc.name)
		if ns != tc.ns || tool != tc.tool || ok != (tc.ns != "") {
			t.Errorf("SplitToolName(%q) = %q, %q, %v", tc.name, ns, tool, ok)
		}
	}
	for subj, want := range map[string]string{"tah.tool.fs.read": "read", "tah.tool.fs.a.b": "", "tah.tool.fs": "", "tah.tool.fsx.read": "", "tah.tool.fs.": ""} {
		if got := wire.ToolOfNamespaceSubject("fs", subj); got != want {
			t.Errorf("ToolOfNamespaceSubject(fs, %q) = %q, want %q", subj, got, want)
		}
	}
	for svc, want := range map[string]string{"tah-tools-fs": "fs", "tah-tool-fs": "", "tah-tools-a__b": "", "tah-tools-cancel": ""} {
		if got, _ := wire.ToolNamespaceOfService(svc); got != want {
			t.Errorf("ToolNamespaceOfService(%q) = %q, want %q", svc, got, want)
		}
	}
	if wire.ToolFromSubject(wire.NamespaceToolSubject("fs", "read")) != "" {
		t.Error("a namespace's endpoint reads as a tool's")
	}
}

// TestToolNamespaceGrant: a tool credential of a namespace holds a fixed
// set of wildcards over the namespace's own subjects, beside the names of
// the single tools it serves; malformed grants are refused.
func TestToolNamespaceGrant(t *testing.T) {
	p, err := wire.RolePermissions(wire.RoleTool, "mcp", []string{"fs__*", "shout"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tah.tool.fs.*", "$SRV.*.tah-tools-fs", "$SRV.*.tah-tools-fs.*", "tah.tool.shout", "$SRV.*.tah-tool-shout"} {
		if !slices.Contains(p.SubscribeAllow, want) {
			t.Errorf("subscribe %q missing: %v", want, p.SubscribeAllow)
		}
	}
	for _, want := range []string{"$KV.tah_tool_results.ns=fs.>", "$JS.API.DIRECT.GET.KV_tah_tool_results.$KV.tah_tool_results.ns=fs.>", "$KV.tah_tool_results.shout.>"} {
		if !slices.Contains(p.PublishAllow, want) {
			t.Errorf("publish %q missing: %v", want, p.PublishAllow)
		}
	}
	for _, bad := range []string{"*", "__*", "a__b__*", "cancel__*", "_a__*", "a b__*"} {
		if _, err := wire.RolePermissions(wire.RoleTool, "mcp", []string{bad}); !errors.Is(err, wire.ErrBadToolNames) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A namespace's grant costs less than two tools' names, however many
	// tools it has.
	size := func(tools []string) int {
		p, err := wire.RolePermissions(wire.RoleTool, "mcp", tools)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		return len(b)
	}
	if ns, two := size([]string{"fs__*"}), size([]string{"fs__read_text_file", "fs__write_file"}); ns >= two {
		t.Fatalf("a namespace's grant is %d bytes, two tools' %d", ns, two)
	}
}
