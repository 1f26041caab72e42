package llm

import (
	"context"
	"errors"
)

// Provider is a language model backend.
//
// Generate returns the complete answer to req. It honours ctx: a cancelled context
// aborts the request at once and returns an error that wraps ctx.Err(). A provider
// never mutates req.
type Provider interface {
	// Name identifies the provider in errors and logs ("openai", "anthropic", "mock").
	Name() string
	Generate(ctx context.Context, req Request) (Response, error)
}

// Delta is one piece of a streamed answer.
type Delta struct {
	// Text is the next piece of the answer's content.
	Text string `json:"text,omitempty"`
	// Reasoning is the next piece of the model's visible thinking.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCall, when set, reports progress on a tool call being written: its index
	// in the answer, and its id and name once known. ArgumentsDelta is the next
	// piece of its arguments.
	ToolCall *ToolCallDelta `json:"tool_call,omitempty"`
}

// ToolCallDelta is progress on one tool call of a streamed answer.
type ToolCallDelta struct {
	Index          int    `json:"index"`
	ID             string `json:"id,omitempty"`
	Name           string `json:"name,omitempty"`
	ArgumentsDelta string `json:"arguments_delta,omitempty"`
}

// Streamer is the optional ability to stream an answer as it is written.
//
// Stream calls onDelta, from the calling goroutine, for each piece as it arrives,
// and returns the complete Response, identical to what Generate would return.
// onDelta must not block for long: it runs on the provider's read path.
type Streamer interface {
	Provider
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// Run calls p, streaming through onDelta when p can stream and onDelta is not
// nil. An answer over MaxAnswerBytes fails with ErrAnswerTooLarge: a stream
// is stopped as soon as it goes over, before the rest is read.
func Run(ctx context.Context, p Provider, req Request, onDelta func(Delta)) (Response, error) {
	s, ok := p.(Streamer)
	if !ok || onDelta == nil {
		resp, err := p.Generate(ctx, req)
		if err == nil && answerSize(resp) > MaxAnswerBytes {
			return Response{}, tooLarge(p, answerSize(resp))
		}
		return resp, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	budget := &answerBudget{cancel: cancel}
	resp, err := s.Stream(sctx, req, func(d Delta) {
		budget.count(d)
		if budget.used <= MaxAnswerBytes {
			onDelta(d)
		}
	})
	if ctx.Err() == nil && errors.Is(context.Cause(sctx), ErrAnswerTooLarge) {
		// The provider may have finished before it saw the stop: the answer is
		// refused all the same.
		return Response{}, tooLarge(p, budget.used)
	}
	return resp, err
}
