package nodecmd

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
)

// TestOneAssembly: from the same settings, tah-node, the cluster harness's
// in-process node and the Go API make the same node (node.Configure): the
// same tools offered (an MCP server's among them, tools.mcp_config), the
// agent gateway up, the same approval policy.
func TestOneAssembly(t *testing.T) {
	root := t.TempDir()
	servers := mcpFile(t)
	settings := func(cfg *config.Config) {
		cfg.Tools.Root = root
		cfg.Tools.MCPConfig = servers
		cfg.Tools.Write = true // write_file, which waits for approval by default
		cfg.Tools.Approval = map[string]string{"write_file": "always", "read_file": "never"}
	}
	type made struct {
		tools    []string
		gateway  bool
		approval tah.ApprovalPolicy
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	describe := func(n *node.Node) made {
		// The MCP servers start in the background: their tools are offered
		// once they are up.
		if err := n.WaitMCP(ctx); err != nil {
			t.Errorf("the MCP server: %v", err)
		}
		var names []string
		for _, s := range n.ToolSchemas() {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		return made{names, n.Gateway() != nil, n.ApprovalPolicy()}
	}

	// tah-node, from a configuration file.
	cfg := config.Default()
	cfg.DataDir, cfg.NATS.Port, cfg.HTTP = t.TempDir(), 0, ""
	settings(&cfg)
	file := filepath.Join(t.TempDir(), "tah.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	seen := make(chan made, 1)
	testHookStarted = func(n *node.Node) { seen <- describe(n) }
	t.Cleanup(func() { testHookStarted = func(*node.Node) {} })
	nodeCtx, stopNode := context.WithCancel(ctx)
	ran := make(chan error, 1)
	var out strings.Builder
	go func() { ran <- Run(nodeCtx, []string{"--config", file}, &out, io.Discard) }() // owned here: ends with stopNode
	var fromNode made
	select {
	case fromNode = <-seen:
	case err := <-ran:
		t.Fatalf("tah-node: %v", err)
	case <-ctx.Done():
		t.Fatal("tah-node did not start")
	}
	stopNode()
	if err := <-ran; err != nil {
		t.Fatalf("tah-node: %v", err)
	}

	// The harness's in-process node.
	c := tahtest.Start(t, tahtest.Options{Nodes: 1, EditConfig: func(_ int, cfg *config.Config) { settings(cfg); cfg.Tools.Remote = true }})
	fromHarness := describe(c.Node(0))

	// The Go API, given tah-node's settings.
	apiCfg := config.Default()
	apiCfg.DataDir, apiCfg.NATS.Port, apiCfg.HTTP = t.TempDir(), 0, ""
	settings(&apiCfg)
	r := tah.New().Use(tah.Settings(apiCfg))
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	fromAPI := describe(r.Node())

	if !fromNode.gateway || !slices.Equal(fromNode.tools, []string{"good__hello", "list_files", "read_file", "write_file"}) ||
		fromNode.approval.Rules["write_file"] != "always" {
		t.Fatalf("tah-node made %+v", fromNode)
	}
	if !strings.Contains(out.String(), "  mcp      good: good__hello\n") {
		t.Errorf("tah-node's banner:\n%s", out.String())
	}
	for name, got := range map[string]made{"tahtest": fromHarness, "the Go API": fromAPI} {
		if !reflect.DeepEqual(got, fromNode) {
			t.Errorf("%s made %+v, tah-node %+v", name, got, fromNode)
		}
	}
}
