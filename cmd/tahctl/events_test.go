package main

import (
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// tahctl events says what a compaction cost and names each artifact.
func TestEventSummariesOfCompactionsAndArtifacts(t *testing.T) {
	call := event.CompactionCall{StepID: "llm4.1", Usage: llm.Usage{InputTokens: 2185, OutputTokens: 214}}
	for _, c := range []struct {
		ev   event.Event
		want string
	}{
		{event.MustNew("s_1", event.ContextCompacted, event.ContextCompactedData{Turns: 3, Chars: 812, CompactionCall: call}),
			"3 turns summarised, 812 characters, 2,185 → 214 tokens"},
		{event.MustNew("s_1", event.ContextCompactFailed, event.ContextCompactFailedData{Error: "empty summary", Code: event.CodeEmptySummary, CompactionCall: call}),
			"empty summary [empty_summary], 2,185 → 214 tokens"},
		{event.MustNew("s_1", event.ArtifactCreated, event.ArtifactCreatedData{ID: "art_1", Name: "notes/plan.md", Ref: event.ArtifactRef{Size: 1300}}),
			"art_1 notes/plan.md, 1,300 bytes"},
	} {
		if got := summary(c.ev); got != c.want {
			t.Errorf("%s: %q, want %q", c.ev.Type, got, c.want)
		}
	}
}
