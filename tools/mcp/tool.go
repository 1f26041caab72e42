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
	// asks: the server does not say the tool is read-only, so its calls
	// wait for approval unless the node's policy names the tool.
	asks bool
	conn *conn
}

var (
	_ tools.IdempotentTool = (*tool)(nil)
	_ tools.ApprovalTool   = (*tool)(nil)
)

func (t *tool) Name() string            { return t.name }
func (t *tool) Description() string     { return t.desc }
func (t *tool) Schema() json.RawMessage { return t.schema }

// Idempotent is the server's hint: read-only or idempotent tools may run
// again when a node resumes a call it lost.
func (t *tool) Idempotent() bool { return t.idempotent }

// AsksApproval is true unless the server's annotations say the tool is
// read-only (readOnlyHint): a tool that may write or delete waits for a
// person's approval by default, as the built-in write_file does.
func (t *tool) AsksApproval() bool { return t.asks }

// Run calls the tool on the server, unless a string argument names a path
// that tools may not use (Protect): that call is refused and never reaches
// the server. A cancel of ctx reaches the server as
// notifications/cancelled (the SDK sends it).
func (t *tool) Run(ctx context.Context, input json.RawMessage) (tools.Result, error) {
	if t.conn.isDown() {
		return tools.Failed(event.CodeToolUnavailable, fmt.Sprintf(
			"Error: the MCP server %s is down and being restarted; %s did not run. Try again shortly.", t.conn.server, t.name)), nil
	}
	if s, ok := t.conn.guard.refused(input); ok {
		return tools.Failed(event.CodeToolError, fmt.Sprintf(
			"Error: %s did not run: its argument %q names a path that tools may not use (TAH's data directory or a credential file).", t.name, s)), nil
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
