package projection

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/tah-dev/tah/llm"
)

// CompactionMarker begins the system prompt of every compaction request, so that a
// provider (the mock's demo mode) or a log reader can tell compaction calls apart.
const CompactionMarker = "[TAH compaction request]"

// Limits of the compaction input (specification 0.31).
const (
	// CompactionInputChars caps the whole transcript given to the summariser.
	CompactionInputChars = 200_000
	// compactItemChars caps one user message, reply, tool call or tool result.
	compactItemChars = 4_000
)

// compactionPrompt asks for the summary the specification describes.
const compactionPrompt = CompactionMarker + `
You compact a conversation between a user and an AI agent that uses tools, so that
the agent can continue the work without the full history. Write a concise summary that
keeps everything needed to continue:

- the user's goals and requests, and how they changed;
- decisions taken, and why;
- files created, changed or read, with their paths and what changed;
- commands or tools run and their important results;
- unfinished items and next steps;
- key facts, names, numbers and identifiers that later turns may need.

If a previous summary is given, fold it in: the new summary replaces it. Write the
summary in the language the user writes in. Answer with the summary only.`

// CompactionPlan is what a compaction needs: the request to send to the model,
// how many turns it covers, and where the summary goes in the history.
type CompactionPlan struct {
	Request llm.Request
	// Turns is how many turns the summary covers.
	Turns int
	// At is the index in the history where the summary message is inserted.
	At int
	// InputChars is the size of the transcript sent, after truncation.
	InputChars int
}

// PlanCompaction plans the summary of msgs (specification 0.31). Automatic
// compaction (auto) covers the turns before the current one since the last
// summary, and its summary goes before the current user message; manual
// compaction covers every turn since the last summary, and its summary goes at the
// end. ok is false when there is no turn to compact. msgs is not mutated.
func PlanCompaction(msgs []llm.Message, auto bool) (plan CompactionPlan, ok bool) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if IsSummary(msgs[i]) {
			last = i
			break
		}
	}
	from, end := last+1, len(msgs)
	if auto {
		ts := Turns(msgs)
		if len(ts) == 0 {
			return CompactionPlan{}, false
		}
		end = ts[len(ts)-1].Start
	}
	if end <= from {
		return CompactionPlan{}, false
	}
	span := msgs[from:end]
	turns := countUsers(span)
	if turns == 0 {
		return CompactionPlan{}, false
	}
	prev := ""
	if last >= 0 {
		prev = strings.TrimSpace(strings.TrimPrefix(msgs[last].Content, SummaryPrefix))
	}
	transcript := compactionTranscript(prev, span)
	return CompactionPlan{
		Request: llm.Request{Messages: []llm.Message{
			llm.System(compactionPrompt),
			llm.User(transcript),
		}},
		Turns:      turns,
		At:         end,
		InputChars: len([]rune(transcript)),
	}, true
}

// ErrEmptySummary: a compaction's answer that summarises nothing, such as
// the empty answer of a reasoning model that ran out of output tokens. The
// compaction fails (agent.context.compact-failed, code empty_summary) and
// trimming takes over, instead of dropping the turns from the context.
var ErrEmptySummary = errors.New("the compaction's answer is an empty summary")

// CheckSummary reports, wrapping ErrEmptySummary, a model's answer to a
// compaction request that is no summary: once SummaryPrefix and spaces are
// taken away, it has no letter and no digit.
func CheckSummary(resp llm.Response) error {
	body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(resp.Content), SummaryPrefix))
	if strings.IndexFunc(body, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
		return nil
	}
	why := fmt.Sprintf("%d characters", len([]rune(resp.Content)))
	if resp.FinishReason != "" {
		why += ", finish reason " + string(resp.FinishReason)
	}
	return fmt.Errorf("%w (%s, %d output tokens): the summarised turns stay, and the request is trimmed to the budget instead; a model with more output tokens avoids it", ErrEmptySummary, why, resp.Usage.OutputTokens)
}

// SummaryContent makes a model's answer a summary message's content: it begins
// with SummaryPrefix exactly once.
func SummaryContent(answer string) string {
	answer = strings.TrimSpace(answer)
	answer = strings.TrimSpace(strings.TrimPrefix(answer, SummaryPrefix))
	return SummaryPrefix + "\n" + answer
}

// compactionTranscript renders the span as text, each item truncated, the whole
// at most CompactionInputChars: when over, the oldest items go first, since the
// previous summary already covers what came before them.
func compactionTranscript(prev string, span []llm.Message) string {
	var items []string
	turn := 0
	for _, m := range span {
		switch m.Role {
		case llm.RoleUser:
			if m.Steer {
				items = append(items, "User, while the turn ran: "+truncate(m.Content, compactItemChars))
				continue
			}
			turn++
			items = append(items, fmt.Sprintf("## Turn %d\nUser: %s", turn, truncate(m.Content, compactItemChars)))
		case llm.RoleAssistant:
			if strings.TrimSpace(m.Content) != "" {
				items = append(items, "Assistant: "+truncate(m.Content, compactItemChars))
			}
			for _, c := range m.ToolCalls {
				items = append(items, fmt.Sprintf("Tool call %s: %s", c.Name, truncate(string(c.Arguments), compactItemChars)))
			}
		case llm.RoleTool:
			label := "Tool result"
			if m.IsError {
				label = "Tool error"
			}
			items = append(items, fmt.Sprintf("%s (%s): %s", label, m.Name, truncate(m.Content, compactItemChars)))
		case llm.RoleSystem:
			if !IsSummary(m) {
				items = append(items, "System: "+truncate(m.Content, compactItemChars))
			}
		}
	}
	head := ""
	if prev != "" {
		head = "# Previous summary\n" + truncate(prev, CompactionInputChars/4) + "\n\n"
	}
	head += "# Conversation to summarise\n"
	size := len([]rune(head))
	for _, it := range items {
		size += len([]rune(it)) + 2
	}
	skipped := 0
	for size > CompactionInputChars-128 && skipped < len(items) {
		size -= len([]rune(items[skipped])) + 2
		skipped++
	}
	var b strings.Builder
	b.WriteString(head)
	if skipped > 0 {
		note := fmt.Sprintf("[%d earlier items left out: the input is limited to %d characters]\n\n", skipped, CompactionInputChars)
		b.WriteString(note)
	}
	for _, it := range items[skipped:] {
		b.WriteString(it)
		b.WriteString("\n\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// truncate cuts s to at most n characters, saying how much it cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	note := fmt.Sprintf(" […%d chars cut]", len(r)-n)
	return string(r[:n]) + note
}
