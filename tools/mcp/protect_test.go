package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/wire"
)

// fsServerEnv, set to a directory, makes the test binary an MCP server on
// stdio like the filesystem server: write_file (no annotations: it may
// write) leaves a mark in that directory for every call that reached it, and
// read_file says it is read-only.
const fsServerEnv = "TAH_MCP_FS_SERVER"

func runFSServer(dir string) {
	s := sdk.NewServer(&sdk.Implementation{Name: "fs", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"},
		"more": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}
	s.AddTool(&sdk.Tool{Name: "write_file", InputSchema: schema}, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct{ Path string }
		_ = json.Unmarshal(r.Params.Arguments, &in)
		mark(dir, "reached-"+strings.ReplaceAll(in.Path, "/", "_"))
		return text("wrote " + in.Path), nil
	})
	s.AddTool(&sdk.Tool{Name: "read_file", InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("read"), nil
		})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// TestProtectedPathsAndApproval: an MCP tool's call that names the data
// directory or a credential file, however it is named, is refused before
// it reaches the server, as the built-ins refuse it; and a tool the server
// does not say is read-only asks for approval by default (its endpoint's
// metadata, which the node reads).
func TestProtectedPathsAndApproval(t *testing.T) {
	marks, root := t.TempDir(), t.TempDir()
	data := filepath.Join(root, "state") // the data directory, by another name than .tah
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(data, filepath.Join(root, "innocent")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "key.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("key.txt", filepath.Join(root, "link.pem")); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, nc := bridgedWith(t, mcp.Config{Servers: map[string]mcp.ServerConfig{
		"fs": {Command: exe, Env: map[string]string{fsServerEnv: marks}, Cwd: root},
	}}, mcp.Options{KeepAlive: -1, Protect: mcp.Protect{Root: root, DataDir: data, Deny: []string{"*.pem"}}})
	waitServing(t, b, "fs", true)

	for i, path := range []string{
		"state/sub/x", "./state", "STATE/../state/sub", filepath.Join(data, "sub"), "innocent/x", "file://" + data,
		".tah/admin.creds", "admin.creds", "sub/ADMIN.CREDS", "a/b/operator.nk", "~/.tah", "link.pem",
	} {
		in, _ := json.Marshal(map[string]any{"path": "ok.txt", "more": []string{"fine", path}})
		res := call(t, nc, "fs__write_file", "c_"+string(rune('a'+i)), string(in))
		if !res.IsError || res.Code != event.CodeToolError || !strings.Contains(res.Output, "names a path that tools may not use") {
			t.Errorf("%s: %+v", path, res)
		}
	}
	// A path outside them runs, and multi-line text is not a path.
	in, _ := json.Marshal(map[string]any{"path": "notes/ok.txt", "content": "keep .tah/\nout of git\n"})
	if res := call(t, nc, "fs__write_file", "c_ok", string(in)); res.IsError || res.Output != "wrote notes/ok.txt" {
		t.Fatalf("%+v", res)
	}
	entries, _ := os.ReadDir(marks)
	if len(entries) != 1 || entries[0].Name() != "reached-notes_ok.txt" {
		t.Fatalf("calls that reached the server: %v", entries)
	}

	asks := endpointMeta(t, nc, "fs", 2)
	if asks["write_file"] != "always" || asks["read_file"] != "" {
		t.Fatalf("approval metadata: %v", asks)
	}
}

// endpointMeta returns the approval metadata of the endpoints of the
// services of namespace ns (one a tool), by tool, once it has want tools.
func endpointMeta(t *testing.T, nc *nats.Conn, ns string, want int) map[string]string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.INFO."+wire.ToolNamespaceService(ns), inbox, nil); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for len(out) < want {
		msg, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("%v; got %v", err, out)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatal(err)
		}
		for _, ep := range info.Endpoints {
			out[wire.ToolOfNamespaceSubject(ns, ep.Subject)] = ep.Metadata[wire.MetaToolApproval]
		}
	}
	return out
}
