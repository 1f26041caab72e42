package llm

import "fmt"

// CheckPairing reports, as an error wrapping ErrUnpaired, the first place where
// msgs break the rule that providers enforce: each tool call of an assistant message
// is answered by one tool message, among the tool messages that directly follow it,
// and every tool message answers such a call.
func CheckPairing(msgs []Message) error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case RoleTool:
			return fmt.Errorf("message %d: tool result %q follows no call: %w", i, m.ToolCallID, ErrUnpaired)
		case RoleAssistant:
			if len(m.ToolCalls) == 0 {
				continue
			}
			want := make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				want[c.ID] = true
			}
			j := i + 1
			for ; j < len(msgs) && msgs[j].Role == RoleTool; j++ {
				id := msgs[j].ToolCallID
				if !want[id] {
					return fmt.Errorf("message %d: tool result %q answers no open call: %w", j, id, ErrUnpaired)
				}
				delete(want, id)
			}
			for _, c := range m.ToolCalls {
				if want[c.ID] {
					return fmt.Errorf("message %d: tool call %q (%s) has no result: %w", i, c.ID, c.Name, ErrUnpaired)
				}
			}
			i = j - 1
		}
	}
	return nil
}
