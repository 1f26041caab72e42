package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// Traces of the work on turns, on the GenAI semantic conventions
// (package telemetry): each piece of work on a turn is an invoke_agent
// span; each LLM call a chat span in it, each tool call an execute_tool
// span. A turn's first span is recorded in its turn.started (trace), so
// that the work a node does on the turn later (an approval decided, a
// resume after its owner died, on any node) is a child of it: one trace
// per turn, whatever ran it. With tracing off the spans are no-ops and
// nothing is recorded.

func (a *AgentContext) tracing() *telemetry.Tracing { return a.Config.Tracing }

func (a *AgentContext) agentName() string {
	if a.Config.AgentName != "" {
		return a.Config.AgentName
	}
	return "tah"
}

// workSpan starts the invoke_agent span of cmd's work on a turn: the child
// of the caller's context for a run that starts one (parent), else of the
// span the open turn recorded, with an event that says what brought the
// work here (prevNode: the session's owner before this node claimed it).
// The caller ends it with endWork.
func (m *Manager) workSpan(ctx context.Context, a *AgentContext, cmd *Command, prevNode string) (context.Context, trace.Span) {
	tr := a.tracing()
	if !tr.Enabled() {
		return ctx, trace.SpanFromContext(ctx) // a no-op span
	}
	parent := ctx
	continued := cmd.Kind != wire.CommandRun || a.state.Status.Active()
	if continued && a.state.TurnTrace != nil {
		parent = telemetry.Parent{Traceparent: a.state.TurnTrace.Traceparent, Tracestate: a.state.TurnTrace.Tracestate}.Context(ctx)
	} else {
		parent = cmd.Trace.Context(ctx)
	}
	attrs := []attribute.KeyValue{
		telemetry.KeyOperation.String(telemetry.OperationInvokeAgent),
		telemetry.KeyAgentName.String(a.agentName()),
		telemetry.KeyConversation.String(a.Session),
		telemetry.KeyProvider.String(providerName(a.Provider)),
		telemetry.KeySession.String(a.Session),
		telemetry.Node(a.Config.Node),
		attribute.String("tah.command", string(cmd.Kind)),
	}
	if cmd.InputID != "" {
		attrs = append(attrs, telemetry.KeyInput.String(cmd.InputID))
	}
	if a.Config.Model != "" {
		attrs = append(attrs, telemetry.KeyRequestModel.String(a.Config.Model))
	}
	ctx, span := tr.Tracer().Start(parent, telemetry.OperationInvokeAgent+" "+a.agentName(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if continued {
		// Where and why the turn goes on here.
		reason := string(cmd.Kind)
		if cmd.Kind == wire.CommandRun {
			reason = "an open turn left by a previous owner"
		}
		span.AddEvent("tah.turn.continued", trace.WithAttributes(telemetry.Node(a.Config.Node),
			attribute.String("tah.reason", reason), attribute.Int("tah.turn", a.state.Turn),
			attribute.String("tah.previous_node", prevNode)))
	}
	return ctx, span
}

// endWork ends the work's span with what the turn came to.
func endWork(span trace.Span, a *AgentContext, err error) {
	if !span.IsRecording() {
		return
	}
	st := a.State()
	span.SetAttributes(telemetry.KeyTurn.Int(st.Turn), telemetry.KeyStatus.String(string(st.Status)),
		telemetry.KeyInputTokens.Int(st.TurnUsage.InputTokens), telemetry.KeyOutputTokens.Int(st.TurnUsage.OutputTokens))
	if a.writer != nil {
		span.SetAttributes(telemetry.KeyEpoch.Int64(int64(a.writer.Epoch())))
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(telemetry.KeyErrorType.String("log"))
	case st.Status == projection.StatusFailed:
		span.SetStatus(codes.Error, st.LastCode)
		span.SetAttributes(telemetry.KeyCode.String(st.LastCode), telemetry.KeyErrorType.String(st.LastCode))
	}
	if st.AwaitingApproval {
		span.AddEvent("tah.approval.waiting")
	}
	span.End()
}

// turnTrace is what turn.started records of the turn's span.
func turnTrace(ctx context.Context) *event.TraceContext {
	p := telemetry.ParentOf(ctx)
	if p.IsZero() {
		return nil
	}
	return &event.TraceContext{Traceparent: p.Traceparent, Tracestate: p.Tracestate}
}

// chatSpan starts the chat span of LLM step stepID.
func chatSpan(ctx context.Context, a *AgentContext, stepID string, req llm.Request, compaction bool) (context.Context, trace.Span) {
	tr := a.tracing()
	if !tr.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	model := req.Model
	if model == "" {
		model = a.Config.Model
	}
	attrs := []attribute.KeyValue{
		telemetry.KeyOperation.String(telemetry.OperationChat),
		telemetry.KeyProvider.String(providerName(a.Provider)),
		telemetry.KeyConversation.String(a.Session),
		telemetry.KeyStep.String(stepID),
		telemetry.KeyTurn.Int(a.state.Turn),
	}
	if model != "" {
		attrs = append(attrs, telemetry.KeyRequestModel.String(model))
	}
	if compaction {
		attrs = append(attrs, attribute.Bool("tah.compaction", true))
	}
	if tr.CaptureContent() {
		if b, err := json.Marshal(req.Messages); err == nil {
			attrs = append(attrs, telemetry.KeyInputMessages.String(string(b)))
		}
	}
	name := telemetry.OperationChat
	if model != "" {
		name += " " + model
	}
	return tr.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat ends a chat span with the answer, or the failure.
func endChat(span trace.Span, a *AgentContext, resp llm.Response, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, llm.Redact(err.Error()))
		span.SetAttributes(telemetry.KeyErrorType.String(errorKind(err)))
		span.End()
		return
	}
	span.SetAttributes(telemetry.KeyInputTokens.Int(resp.Usage.InputTokens), telemetry.KeyOutputTokens.Int(resp.Usage.OutputTokens),
		telemetry.KeyFinish.StringSlice([]string{string(resp.FinishReason)}))
	if resp.Model != "" {
		span.SetAttributes(telemetry.KeyResponseModel.String(resp.Model))
	}
	if resp.Usage.CacheReadTokens > 0 {
		span.SetAttributes(telemetry.KeyCacheRead.Int(resp.Usage.CacheReadTokens))
	}
	if a.tracing().CaptureContent() {
		if b, err := json.Marshal([]llm.Message{resp.Message()}); err == nil {
			span.SetAttributes(telemetry.KeyOutput.String(string(b)))
		}
	}
	span.End()
}

// errorKind names a provider failure for error.type: never its message.
func errorKind(err error) string {
	var pe *llm.ProviderError
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, llm.ErrAnswerTooLarge):
		return event.CodeAnswerTooLarge
	case errors.As(err, &pe) && pe.Err != nil:
		return strings.ReplaceAll(pe.Err.Error(), " ", "_")
	default:
		return "provider"
	}
}

// toolSpans starts the execute_tool span of each call, in ctx's span.
func toolSpans(ctx context.Context, a *AgentContext, ids []string, calls []llm.ToolCall) []trace.Span {
	tr := a.tracing()
	if !tr.Enabled() {
		return nil
	}
	spans := make([]trace.Span, len(calls))
	for i, c := range calls {
		attrs := []attribute.KeyValue{
			telemetry.KeyOperation.String(telemetry.OperationExecuteTool),
			telemetry.KeyToolName.String(c.Name), telemetry.KeyToolCallID.String(c.ID),
			telemetry.KeyToolType.String("function"), telemetry.KeyStep.String(ids[i]),
			telemetry.KeyRunner.String(a.Tools.Runner(c.Name)), telemetry.KeyConversation.String(a.Session),
		}
		if tr.CaptureContent() {
			attrs = append(attrs, telemetry.KeyToolArguments.String(string(c.Arguments)))
		}
		_, spans[i] = tr.Tracer().Start(ctx, telemetry.OperationExecuteTool+" "+c.Name,
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	}
	return spans
}

// spanContexts are the spans' contexts, for the runner to put in each
// call's context (a remote call sends it on); nil when not tracing.
func spanContexts(spans []trace.Span) []trace.SpanContext {
	if spans == nil {
		return nil
	}
	out := make([]trace.SpanContext, len(spans))
	for i, s := range spans {
		out[i] = s.SpanContext()
	}
	return out
}

// endTools ends the calls' spans with their results.
func endTools(spans []trace.Span, a *AgentContext, results []toolrunner.CallResult) {
	for i, s := range spans {
		if i >= len(results) {
			s.End()
			continue
		}
		r := results[i].Result
		if r.IsError {
			s.SetStatus(codes.Error, r.Code)
			s.SetAttributes(telemetry.KeyErrorType.String(r.Code))
		}
		if a.tracing().CaptureContent() {
			s.SetAttributes(telemetry.KeyToolResult.String(r.Output))
		}
		s.End()
	}
}

func providerName(p llm.Provider) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// budgetReachedEvent marks, on the work's span, the limit a turn reached:
// the span ends in error with code budget_exceeded, and this says which.
func budgetReachedEvent(ctx context.Context, r event.BudgetReached) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("tah.budget.reached", trace.WithAttributes(
		telemetry.KeyBudgetScope.String(r.Scope), telemetry.KeyBudgetKind.String(r.Kind),
		telemetry.KeyBudgetFrom.String(r.From), telemetry.KeyBudgetLimit.Float64(r.Limit),
		telemetry.KeyBudgetSpent.Float64(r.Spent)))
}
