package llm

import (
	"context"
	"errors"
	"fmt"
)

// MaxAnswerBytes bounds one answer that Run accepts: its content, reasoning
// and tool-call arguments together, in bytes. A provider that streams more
// (a broken or hostile server) is stopped there, so that what it sends never
// fills the node's memory, and the call fails with ErrAnswerTooLarge.
const MaxAnswerBytes = 32 << 20

// ErrAnswerTooLarge is wrapped by the *ProviderError of a call whose answer
// went over MaxAnswerBytes. It is not retried: the same request would get the
// same answer.
var ErrAnswerTooLarge = errors.New("answer too large")

// answerBudget counts the bytes of an answer as its deltas arrive, and stops
// the call once they go over MaxAnswerBytes.
type answerBudget struct {
	used   int
	cancel context.CancelCauseFunc
}

// count adds d to the answer and stops the call when it is over the bound.
func (b *answerBudget) count(d Delta) {
	b.used += len(d.Text) + len(d.Reasoning)
	if d.ToolCall != nil {
		b.used += len(d.ToolCall.ArgumentsDelta)
	}
	if b.used > MaxAnswerBytes {
		b.cancel(ErrAnswerTooLarge)
	}
}

// answerSize is the bytes of r that MaxAnswerBytes bounds.
func answerSize(r Response) int {
	n := len(r.Content) + len(r.Reasoning)
	for _, c := range r.ToolCalls {
		n += len(c.Arguments)
	}
	return n
}

// tooLarge is the error of a call of p whose answer went over the bound.
func tooLarge(p Provider, size int) error {
	return &ProviderError{Provider: p.Name(), Err: ErrAnswerTooLarge,
		Message: fmt.Sprintf("the answer is over %d bytes (%d received), more than a node accepts of one answer; the call was stopped. Ask for a shorter answer, or lower the request's max_tokens", MaxAnswerBytes, size)}
}
