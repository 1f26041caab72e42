package session

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// The bounds that let an answer or a result skip its measuring encoding are
// never below the encoding's size, whatever the strings hold: the worst
// case is every byte escaped to six.
func TestPayloadBoundsAreNeverBelowTheSize(t *testing.T) {
	worst := strings.Repeat("\x01<>&\"\\", 50)
	args := json.RawMessage(`{"q":"` + strings.Repeat(`<&>\u0001`, 40) + `"}`)
	ref := &event.ArtifactRef{Bucket: "tah_artifacts" + worst, Object: worst, Size: 1 << 40, SHA256: strings.Repeat("f", 64)}
	cost := &pricing.Cost{USD: 1234567.123456789, Unpriced: 99}
	for _, d := range []event.LLMCompletedData{
		{},
		{StepID: worst, Response: llm.Response{Model: worst, Content: worst, Reasoning: worst, FinishReason: llm.FinishReason(worst),
			ToolCalls: []llm.ToolCall{{ID: worst, Name: worst, Arguments: args}, {}, {ID: "x"}},
			Usage:     llm.Usage{InputTokens: 1 << 60, OutputTokens: 1 << 60, CacheReadTokens: 1 << 60}},
			Artifact: ref, DurationMS: 1 << 60, Cost: cost},
	} {
		if size, bound := payloadSize(d), completedBound(d); size > bound {
			t.Errorf("llm.completed of %d bytes, bound %d", size, bound)
		}
	}
	for _, d := range []event.ToolFinishedData{
		{},
		{StepID: worst, CallID: worst, Name: worst, Output: worst, IsError: true, Code: worst, Artifact: ref, DurationMS: 1 << 60},
	} {
		if size, bound := payloadSize(d), finishedBound(d); size > bound {
			t.Errorf("tool.finished of %d bytes, bound %d", size, bound)
		}
	}
}
