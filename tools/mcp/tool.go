package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// tool is one tool of an MCP server as a TAH tool, bound to one connection:
// a restarted server's tools are new values.
type tool struct {
	name, remote, desc string
	schema             json.RawMessage
	idempotent         bool
	conn               *conn
}

var _ tools.IdempotentTool = (*tool)(nil)

func (t *tool) Name() string            { return t.name }
func (t *tool) Description() string     { return t.desc }
func (t *tool) Schema() json.RawMessage { return t.schema }

// Idempotent is the server's hint: read-only or idempotent tools may run
// again when a node resumes a call it lost.
func (t *tool) Idempotent() bool { return t.idempotent }

// Run calls the tool on the server. A cancel of ctx reaches the server as
// notifications/cancelled (the SDK sends it).
func (t *tool) Run(ctx context.Context, input json.RawMessage) (tools.Result, error) {
	if t.conn.isDown() {
		return tools.Failed(event.CodeToolUnavailable, fmt.Sprintf(
			"Error: the MCP server %s is down and being restarted; %s did not run. Try again shortly.", t.conn.server, t.name)), nil
	}
	res, err := t.conn.sess.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: input})
	if err == nil {
		return toResult(ctx, res), nil
	}
	if ctx.Err() != nil {
		return tools.Result{}, ctx.Err() // the executor reports the cancel or the timeout
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return tools.Failed(event.CodeToolError, fmt.Sprintf("Error: the MCP server %s refused the call: %s", t.conn.server, rpc.Message)), nil
	}
	return tools.Failed(event.CodeInterrupted, fmt.Sprintf(
		"Error: the MCP server %s stopped during the call to %s (%v); it is being restarted. The call's outcome is unknown: check before calling again.",
		t.conn.server, t.name, err)), nil
}
