package mock

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tah-dev/tah/llm"
)

// The demo's summary of a compaction request: SummaryPrefix, a newline, then
// bullet points taken from the transcript the request carries.

// turnSummary is what the summary keeps of one turn.
type turnSummary struct {
	number int
	asked  string
	tools  []string
	errors []string
	answer string
}

var (
	turnHeading = regexp.MustCompile(`^##\s*Turn\s+(\d+)\s*$`)
	toolCallRe  = regexp.MustCompile(`^Tool call ([^:]+):\s?(.*)$`)
	toolResRe   = regexp.MustCompile(`^Tool (result|error) \(([^)]*)\):\s?(.*)$`)
)

// summarize writes the summary of the conversation in msgs (a compaction request:
// its system prompt and the transcript, as projection writes it, or any
// conversation).
func summarize(msgs []llm.Message) string {
	var text []string
	zh := false
	for _, m := range msgs {
		if m.Role == llm.RoleSystem && strings.Contains(m.Content, CompactionMarker) {
			continue
		}
		if m.Role == llm.RoleUser && hasCJK(m.Content) {
			zh = true
		}
		text = append(text, transcriptOf(m))
	}
	prev, turns, notes := parseTranscript(strings.Join(text, "\n\n"))
	for _, t := range turns {
		if hasCJK(t.asked) {
			zh = true
		}
	}

	var bullets []string
	add := func(s string) { bullets = append(bullets, "- "+s) }
	for i, p := range prev {
		if i == 10 {
			if zh {
				add(fmt.Sprintf("（之前的摘要还有 %d 条）", len(prev)-10))
			} else {
				add(fmt.Sprintf("(%d more points of the previous summary)", len(prev)-10))
			}
			break
		}
		add(p)
	}
	keep := turns
	if len(turns) > 8 {
		keep = append(append([]turnSummary(nil), turns[:2]...), turns[len(turns)-5:]...)
	}
	for i, t := range keep {
		if len(turns) > 8 && i == 2 {
			if zh {
				add(fmt.Sprintf("（中间还有 %d 轮，此处从略）", len(turns)-7))
			} else {
				add(fmt.Sprintf("(%d turns in between, left out)", len(turns)-7))
			}
		}
		if t.asked != "" {
			if zh {
				add(fmt.Sprintf("第 %d 轮，用户要求：“%s”", t.number, clip(t.asked, 160)))
			} else {
				add(fmt.Sprintf("Turn %d: the user asked: \"%s\"", t.number, clip(t.asked, 160)))
			}
		}
		if len(t.tools) > 0 {
			if zh {
				add(fmt.Sprintf("第 %d 轮调用的工具：%s", t.number, strings.Join(t.tools, ", ")))
			} else {
				add(fmt.Sprintf("Tools used in turn %d: %s", t.number, strings.Join(t.tools, ", ")))
			}
		}
		for _, e := range t.errors {
			if zh {
				add(fmt.Sprintf("第 %d 轮的工具错误：%s", t.number, e))
			} else {
				add(fmt.Sprintf("Tool error in turn %d: %s", t.number, e))
			}
		}
		if t.answer != "" {
			if zh {
				add(fmt.Sprintf("第 %d 轮的回答：“%s”", t.number, clip(t.answer, 160)))
			} else {
				add(fmt.Sprintf("Answer in turn %d: \"%s\"", t.number, clip(t.answer, 160)))
			}
		}
	}
	for _, n := range notes {
		add(n)
	}
	if len(bullets) == 0 {
		if zh {
			add("之前的对话中没有可总结的内容。")
		} else {
			add("The earlier conversation holds nothing to summarise.")
		}
	}
	return SummaryPrefix + "\n" + strings.Join(bullets, "\n")
}

// transcriptOf renders one message as projection's transcript does, so that a
// conversation sent as messages reads like a transcript sent as text.
func transcriptOf(m llm.Message) string {
	switch m.Role {
	case llm.RoleUser:
		if strings.Contains(m.Content, "# Conversation to summarise") || strings.Contains(m.Content, "## Turn ") {
			return m.Content
		}
		return "## Turn ?\nUser: " + m.Content
	case llm.RoleAssistant:
		var parts []string
		if strings.TrimSpace(m.Content) != "" {
			parts = append(parts, "Assistant: "+m.Content)
		}
		for _, c := range m.ToolCalls {
			parts = append(parts, fmt.Sprintf("Tool call %s: %s", c.Name, c.Arguments))
		}
		return strings.Join(parts, "\n\n")
	case llm.RoleTool:
		label := "Tool result"
		if m.IsError {
			label = "Tool error"
		}
		return fmt.Sprintf("%s (%s): %s", label, m.Name, m.Content)
	default:
		if strings.HasPrefix(m.Content, SummaryPrefix) {
			return "# Previous summary\n" + strings.TrimPrefix(m.Content, SummaryPrefix)
		}
		return ""
	}
}

// parseTranscript reads the transcript: the previous summary's points, the turns,
// and notes such as "[3 earlier items left out ...]".
func parseTranscript(s string) (prev []string, turns []turnSummary, notes []string) {
	const (
		modeNone = iota
		modePrev
		modeConv
	)
	mode := modeNone
	var cur *turnSummary
	var item *string // the item that continuation lines extend
	newTurn := func(n int) {
		if n == 0 {
			n = len(turns) + 1
		}
		turns = append(turns, turnSummary{number: n})
		cur = &turns[len(turns)-1]
		item = nil
	}
	for _, raw := range strings.Split(s, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
			item = nil
			continue
		case strings.HasPrefix(line, "# Previous summary"):
			mode, item = modePrev, nil
			continue
		case strings.HasPrefix(line, "# Conversation to summarise"):
			mode, item = modeConv, nil
			continue
		case mode == modePrev:
			p := strings.TrimSpace(strings.TrimLeft(line, "-*• "))
			if p != "" && !strings.HasPrefix(p, SummaryPrefix) {
				prev = append(prev, clip(p, 200))
			}
			continue
		}
		if m := turnHeading.FindStringSubmatch(line); m != nil {
			var n int
			fmt.Sscanf(m[1], "%d", &n)
			newTurn(n)
			continue
		}
		if line == "## Turn ?" {
			newTurn(0)
			continue
		}
		if strings.HasPrefix(line, "[") && strings.Contains(line, "left out") {
			notes = append(notes, strings.Trim(line, "[]"))
			continue
		}
		if cur == nil {
			newTurn(0)
		}
		switch {
		case strings.HasPrefix(line, "User:"):
			cur.asked = strings.TrimSpace(strings.TrimPrefix(line, "User:"))
			item = &cur.asked
		case strings.HasPrefix(line, "Assistant:"):
			cur.answer = strings.TrimSpace(strings.TrimPrefix(line, "Assistant:"))
			item = &cur.answer
		case toolCallRe.MatchString(line):
			m := toolCallRe.FindStringSubmatch(line)
			cur.tools = append(cur.tools, fmt.Sprintf("%s(%s)", m[1], clip(m[2], 60)))
			item = nil
		case toolResRe.MatchString(line):
			m := toolResRe.FindStringSubmatch(line)
			if m[1] == "error" {
				cur.errors = append(cur.errors, fmt.Sprintf("%s: %s", m[2], clip(m[3], 120)))
			}
			item = nil
		case strings.HasPrefix(line, "System:"):
			item = nil
		default:
			// A continuation of a multi-line item: only the first line of an
			// answer is kept, but a question may start on a later line.
			if item != nil && *item == "" {
				*item = line
			}
		}
	}
	return prev, turns, notes
}
