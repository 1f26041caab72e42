package llm

import "fmt"

// CheckPairing reports, as an error wrapping ErrUnpaired, the first place where
// msgs break the rule that providers enforce: each tool call of an assistant message
// is answered by one tool message, among the tool messages that directly follow it,
// and every tool message answers such a call.
//
// It allocates nothing for a history that pairs (but for a message of more
// than 16 calls): providers and the mock check every request, whose history
// grows with the session, so this runs over every message of every step.
func CheckPairing(msgs []Message) error {
	var small [16]bool
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i] // not a copy: a Message is 100 bytes, the history thousands of them
		switch m.Role {
		case RoleTool:
			return fmt.Errorf("message %d: tool result %q follows no call: %w", i, m.ToolCallID, ErrUnpaired)
		case RoleAssistant:
			if len(m.ToolCalls) == 0 {
				continue
			}
			// answered[k]: the id of call k has its result (every call of
			// that id: ids are what results answer).
			answered := small[:0]
			if len(m.ToolCalls) > len(small) {
				answered = make([]bool, 0, len(m.ToolCalls))
			}
			answered = answered[:len(m.ToolCalls)]
			clear(answered)
			j := i + 1
			for ; j < len(msgs) && msgs[j].Role == RoleTool; j++ {
				id := msgs[j].ToolCallID
				open := false
				for k, c := range m.ToolCalls {
					if c.ID == id && !answered[k] {
						answered[k], open = true, true
					}
				}
				if !open {
					return fmt.Errorf("message %d: tool result %q answers no open call: %w", j, id, ErrUnpaired)
				}
			}
			for k, c := range m.ToolCalls {
				if !answered[k] {
					return fmt.Errorf("message %d: tool call %q (%s) has no result: %w", i, c.ID, c.Name, ErrUnpaired)
				}
			}
			i = j - 1
		}
	}
	return nil
}
