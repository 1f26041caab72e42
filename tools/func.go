package tools

import (
	"context"
	"encoding/json"
	"time"
)

// Spec describes a tool made from a function with Func.
type Spec struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the input; nil means any object.
	Schema     json.RawMessage
	Idempotent bool
	Exclusive  bool
	// Timeout is the tool's own time limit; zero means the executor's default.
	Timeout time.Duration
}

// RunFunc is the body of a tool made with Func.
type RunFunc func(ctx context.Context, input json.RawMessage) (Result, error)

// Func returns a tool described by spec that runs run. It has every optional
// ability, answering from spec.
func Func(spec Spec, run RunFunc) Tool { return &funcTool{spec: spec, run: run} }

type funcTool struct {
	spec Spec
	run  RunFunc
}

var (
	_ IdempotentTool = (*funcTool)(nil)
	_ ExclusiveTool  = (*funcTool)(nil)
	_ TimeoutTool    = (*funcTool)(nil)
)

func (f *funcTool) Name() string            { return f.spec.Name }
func (f *funcTool) Description() string     { return f.spec.Description }
func (f *funcTool) Schema() json.RawMessage { return f.spec.Schema }
func (f *funcTool) Idempotent() bool        { return f.spec.Idempotent }
func (f *funcTool) Exclusive() bool         { return f.spec.Exclusive }
func (f *funcTool) Timeout() time.Duration  { return f.spec.Timeout }
func (f *funcTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	return f.run(ctx, input)
}
