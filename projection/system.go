package projection

import (
	"strings"

	"github.com/tah-dev/tah/llm"
)

// SummaryPrefix begins the content of every summary message (specification 0.31).
const SummaryPrefix = "[Summary of the earlier conversation]"

// IsSummary reports whether m is a summary message.
func IsSummary(m llm.Message) bool {
	return m.Role == llm.RoleSystem && strings.HasPrefix(m.Content, SummaryPrefix)
}

// ReplaceSystemPrompt returns msgs with prompt as its first system message: the
// current configuration wins over the stored one when a session is reopened
// (specification v0.22). An empty prompt removes the stored one. Summaries are not
// system prompts and stay where they are. msgs is not mutated.
func ReplaceSystemPrompt(msgs []llm.Message, prompt string) []llm.Message {
	hasPrompt := len(msgs) > 0 && msgs[0].Role == llm.RoleSystem && !IsSummary(msgs[0])
	switch {
	case hasPrompt && prompt == "":
		return llm.CloneMessages(msgs[1:])
	case hasPrompt && msgs[0].Content == prompt:
		return msgs
	case hasPrompt:
		out := llm.CloneMessages(msgs)
		out[0].Content = prompt
		return out
	case prompt == "":
		return msgs
	default:
		return append([]llm.Message{llm.System(prompt)}, llm.CloneMessages(msgs)...)
	}
}

// ApplySummary returns what is sent of msgs once summaries are taken into account
// (specification 0.31): the newest summary is merged into the leading system
// message and nothing between them is sent. Without a summary, msgs is returned as
// it is. msgs is not mutated.
func ApplySummary(msgs []llm.Message) []llm.Message {
	k := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if IsSummary(msgs[i]) {
			k = i
			break
		}
	}
	if k < 0 {
		return msgs
	}
	lead := llm.System(msgs[k].Content)
	if len(msgs) > 0 && msgs[0].Role == llm.RoleSystem && !IsSummary(msgs[0]) {
		lead.Content = msgs[0].Content + "\n\n" + msgs[k].Content
	}
	rest := msgs[k+1:]
	// A summary never sits between calls and their results (Apply refuses that),
	// but results without their call must never be sent: drop any that lead.
	for len(rest) > 0 && rest[0].Role == llm.RoleTool {
		rest = rest[1:]
	}
	out := make([]llm.Message, 0, 1+len(rest))
	out = append(out, lead)
	return append(out, llm.CloneMessages(rest)...)
}
