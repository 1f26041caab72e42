package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Defaults of an Executor's Options.
const (
	// DefaultTimeout limits a call whose tool declares no timeout of its own.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxOutput is the longest output, in characters, kept whole in a result.
	DefaultMaxOutput = 32 * 1024
	// DefaultPreview is how many characters of a longer output the result keeps.
	DefaultPreview = 4 * 1024
	// DefaultGrace is how long a call whose context is done may take to return.
	DefaultGrace = time.Second
)

// Options configure an Executor. Zero values mean the defaults above.
type Options struct {
	// Timeout limits each call whose tool has no Timeout of its own.
	Timeout time.Duration
	// MaxOutput is the longest output kept whole, in characters; a longer one is
	// cut to Preview characters and a marker. Negative: never cut.
	MaxOutput int
	// Preview is how many characters of a cut output are kept.
	Preview int
	// Artifacts, when set, keeps the full output of a cut result; the result's
	// Artifact refers to it.
	Artifacts ArtifactStore
	// Grace is how long Execute waits, once a call's context is done, for the tool
	// to return before it reports the call cancelled or timed out without it. A
	// tool that ignores its context is left to finish on its own; its result is
	// dropped.
	Grace time.Duration
	// Logger receives a record of every panic, with its stack; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Preview <= 0 {
		o.Preview = DefaultPreview
	}
	if o.MaxOutput > 0 && o.Preview > o.MaxOutput {
		o.Preview = o.MaxOutput
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Executor runs tool calls against a catalog. It is safe for concurrent use.
type Executor struct {
	cat  Catalog
	opts Options
}

// NewExecutor returns an executor of the tools of cat.
func NewExecutor(cat Catalog, opts Options) *Executor {
	return &Executor{cat: cat, opts: opts.withDefaults()}
}

// With is an executor of the tools of cat with e's options.
func (e *Executor) With(cat Catalog) *Executor { return &Executor{cat: cat, opts: e.opts} }

// Catalog returns the executor's tools.
func (e *Executor) Catalog() Catalog { return e.cat }

// Tool returns the tool named name.
func (e *Executor) Tool(name string) (Tool, bool) { return e.cat.Tool(name) }

// Execute runs call with the default options. See Executor.Execute.
func Execute(ctx context.Context, cat Catalog, call llm.ToolCall) Result {
	return NewExecutor(cat, Options{}).Execute(ctx, call)
}

// Execute runs one call and returns its result. It never panics and never returns
// an error: every failure becomes a Result with IsError set, an Output that
// explains it to the model, and a Code:
//
//   - event.CodeUnknownTool: no tool of that name;
//   - event.CodeInvalidInput: the arguments are not JSON or fail the schema (the
//     tool does not run);
//   - event.CodeTimeout: the tool's timeout, or ctx's deadline, passed;
//   - event.CodeCancelled: ctx was cancelled;
//   - event.CodeInternal: the tool panicked;
//   - event.CodeToolError: the tool returned an error (or the code of its
//     *ToolError), or a result with IsError set and no code.
//
// The tool runs with a context that carries the CallInfo (call id, tool name, and
// the session from ctx's CallInfo) and is done at the timeout or when ctx is.
// An output longer than Options.MaxOutput is cut to a preview (see Options).
func (e *Executor) Execute(ctx context.Context, call llm.ToolCall) Result {
	info, _ := CallFrom(ctx)
	info.ID, info.Name = call.ID, call.Name
	res := e.execute(ctx, info, call)
	if !res.IsError {
		res.Code = ""
	} else if res.Code == "" {
		res.Code = event.CodeToolError
	}
	return e.offload(ctx, info, res)
}

func (e *Executor) execute(ctx context.Context, info CallInfo, call llm.ToolCall) Result {
	t, ok := e.cat.Tool(call.Name)
	if !ok {
		return Failed(event.CodeUnknownTool, unknownTool(call.Name, e.cat))
	}
	input := call.Arguments
	if s := bytes.TrimSpace(input); len(s) == 0 || bytes.Equal(s, []byte("null")) {
		input = json.RawMessage("{}")
	}
	schema, err := CompileSchema(SchemaOf(t))
	if err != nil {
		return Failed(event.CodeInternal, fmt.Sprintf("Error: tool %s cannot be called: %v", call.Name, err))
	}
	if err := validateInput(schema, input); err != nil {
		return Failed(event.CodeInvalidInput, invalidInput(t, err))
	}
	if ctx.Err() != nil {
		return ctxFailure(ctx, ctx, call.Name, 0)
	}

	timeout := TimeoutOf(t, e.opts.Timeout)
	tctx, cancel := context.WithTimeout(WithArtifacts(WithCall(ctx, info), e.opts.Artifacts), timeout)
	defer cancel()
	type outcome struct {
		res    Result
		err    error
		panicV any
		stack  []byte
	}
	done := make(chan outcome, 1)
	// This goroutine's owner is this call; its stop is tctx. A tool that ignores
	// tctx outlives the call, and what it sends is dropped into the buffer.
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{panicV: v, stack: debug.Stack()}
			}
		}()
		res, err := t.Run(tctx, input)
		done <- outcome{res: res, err: err}
	}()

	var out outcome
	select {
	case out = <-done:
	case <-tctx.Done():
		grace := time.NewTimer(e.opts.Grace)
		select {
		case out = <-done:
		case <-grace.C:
			out = outcome{err: tctx.Err()}
		}
		grace.Stop()
	}

	switch {
	case out.panicV != nil:
		e.opts.Logger.Error("tool panicked", "tool", call.Name, "call", call.ID, "panic", fmt.Sprint(out.panicV), "stack", string(out.stack))
		return Failed(event.CodeInternal, fmt.Sprintf("Error: tool %s failed with an internal error (it panicked: %v); the call has no result.", call.Name, out.panicV))
	case out.err == nil:
		return out.res
	case tctx.Err() != nil && (errors.Is(out.err, context.Canceled) || errors.Is(out.err, context.DeadlineExceeded)):
		return ctxFailure(ctx, tctx, call.Name, timeout)
	}
	var te *ToolError
	if errors.As(out.err, &te) {
		msg := out.err.Error()
		if te.Err != nil {
			msg = te.Err.Error()
		}
		code := te.Code
		if code == "" {
			code = event.CodeToolError
		}
		return Failed(code, "Error: "+msg)
	}
	return Failed(event.CodeToolError, "Error: "+out.err.Error())
}

// ctxFailure reports a call whose context is done: cancelled when ctx (the
// caller's) was cancelled, timed out otherwise.
func ctxFailure(ctx, tctx context.Context, name string, timeout time.Duration) Result {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return Failed(event.CodeCancelled, fmt.Sprintf("Error: the call to %s was cancelled.", name))
	case ctx.Err() != nil:
		return Failed(event.CodeTimeout, fmt.Sprintf("Error: the call to %s ran out of time (the deadline of its batch passed).", name))
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return Failed(event.CodeTimeout, fmt.Sprintf("Error: the call to %s timed out after %v.", name, timeout))
	}
	return Failed(event.CodeCancelled, fmt.Sprintf("Error: the call to %s was cancelled.", name))
}

func unknownTool(name string, cat Catalog) string {
	var names []string
	for _, s := range cat.Schemas() {
		names = append(names, s.Name)
	}
	const max = 50
	more := ""
	if len(names) > max {
		more = fmt.Sprintf(" and %d more", len(names)-max)
		names = names[:max]
	}
	avail := "none"
	if len(names) > 0 {
		avail = strings.Join(names, ", ") + more
	}
	return fmt.Sprintf("Error: unknown tool %q. Available tools: %s.", name, avail)
}

func invalidInput(t Tool, err error) string {
	msg := strings.TrimPrefix(err.Error(), ErrInvalidInput.Error())
	msg = strings.TrimPrefix(msg, ":")
	msg = strings.TrimPrefix(msg, " ")
	s := fmt.Sprintf("Error: invalid input for tool %s:", t.Name())
	if strings.HasPrefix(msg, "\n") {
		s += msg
	} else {
		s += " " + msg
	}
	if schema := SchemaOf(t); len(schema) <= 2000 {
		s += "\nThe input must match this JSON Schema: " + string(compact(schema))
	}
	return s
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
