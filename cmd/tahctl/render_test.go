package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// terminalWatch is a watch that streams the answer, as on a terminal, with
// stdout and stderr on one buffer: the order a person sees.
func terminalWatch() (*watch, *bytes.Buffer) {
	var screen bytes.Buffer
	g := &globals{stdout: &screen, stderr: &screen, getenv: func(string) string { return "" }}
	return &watch{g: g, sid: "s_1", stream: true, steps: map[string]*llmStep{}, tools: map[string]event.ToolStartedData{}}, &screen
}

// TestAnswerComesAfterTheToolLineBeforeIt: the deltas and the events come on
// two subscriptions, in no order between them: the next model call's first
// words may arrive before the tool.finished logged before that call. They
// are shown after its line, never before it.
func TestAnswerComesAfterTheToolLineBeforeIt(t *testing.T) {
	w, screen := terminalWatch()
	call := llm.ToolCall{ID: "c1", Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`)}
	w.onEvent(event.MustNew("s_1", event.LLMStarted, event.LLMStartedData{StepID: "llm1.1", Turn: 1}))
	w.onEvent(event.MustNew("s_1", event.LLMCompleted, event.LLMCompletedData{StepID: "llm1.1",
		Response: llm.Response{ToolCalls: []llm.ToolCall{call}, FinishReason: "tool_calls"}}))
	w.onEvent(event.MustNew("s_1", event.ToolStarted, event.ToolStartedData{StepID: "tool1.2", Call: call}))
	// The next call's first words, before the events that precede it.
	w.onDelta(client.Delta{Delta: wire.Delta{StepID: "llm1.3", Delta: llm.Delta{Text: "The project "}}})
	w.onEvent(event.MustNew("s_1", event.ToolFinished, event.ToolFinishedData{StepID: "tool1.2", CallID: "c1", Name: "list_files", Output: "a/\nb.go"}))
	w.onEvent(event.MustNew("s_1", event.LLMStarted, event.LLMStartedData{StepID: "llm1.3", Turn: 1}))
	w.onDelta(client.Delta{Delta: wire.Delta{StepID: "llm1.3", Delta: llm.Delta{Text: "has two entries."}}})
	w.onEvent(event.MustNew("s_1", event.LLMCompleted, event.LLMCompletedData{StepID: "llm1.3",
		Response: llm.Response{Content: "The project has two entries.", FinishReason: "stop"}}))
	w.closeLine()

	got := screen.String()
	tool, answer := strings.Index(got, "list_files"), strings.Index(got, "The project")
	if tool < 0 || answer < 0 || answer < tool {
		t.Fatalf("the answer's first words are not after the tool line:\n%s", got)
	}
	if strings.Count(got, "The project has two entries.") != 1 {
		t.Fatalf("the answer is not shown once, whole:\n%s", got)
	}
}

// TestToolLineCutsAtWordsAndSaysWhatWasCut: a tool line is cut at the end of
// a word, and an output cut to a preview is told as cut with the whole's
// size, not as the preview's line count.
func TestToolLineCutsAtWordsAndSaysWhatWasCut(t *testing.T) {
	w, _ := terminalWatch()
	var file strings.Builder
	for i := range 510 {
		file.WriteString("line " + strings.Repeat("word ", i%9) + "end\n")
	}
	out := tools.Truncate("output", file.String(), tools.DefaultPreview, "the full output is artifact tah_artifacts/x")
	line := w.toolLine(event.ToolFinishedData{CallID: "c1", Name: "read_file", Output: out})
	if strings.Contains(line, "lines:") {
		t.Errorf("a cut output is told by its preview's lines: %s", line)
	}
	if !strings.Contains(line, num(len(file.String()))+" characters, cut: line end") {
		t.Errorf("the tool line does not say the output was cut from %s characters: %s", num(len(file.String())), line)
	}

	const text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
	for n := 20; n < len(text); n++ {
		got := oneLine(text, n)
		cut := strings.TrimSuffix(got, "…")
		if !strings.HasSuffix(got, "…") || !strings.HasPrefix(text, cut) {
			t.Fatalf("oneLine(%d) = %q", n, got)
		}
		if rest := text[len(cut):]; rest[0] != ' ' {
			t.Errorf("oneLine(%d) = %q: cut mid-word", n, got)
		}
	}
	if got := preview("a\nb\n[truncated: showed lines 1 to 2; the file has more (99 bytes in all); continue with {\"offset\": 2}]", 60); got != "lines 1–2 of more: a, b" {
		t.Errorf("read_file's cut: %q", got)
	}
}
