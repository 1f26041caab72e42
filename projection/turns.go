package projection

import "github.com/tah-dev/tah/llm"

// Turn is the span of one turn in a message history: from a user message up to,
// not including, the next user message.
type Turn struct {
	Start, End int // messages[Start:End]; messages[Start] is the user message
}

// Turns splits msgs into turns. Messages before the first user message (the system
// message, a summary) belong to no turn.
func Turns(msgs []llm.Message) []Turn {
	var turns []Turn
	for i, m := range msgs {
		if !m.StartsTurn() {
			continue
		}
		if n := len(turns); n > 0 {
			turns[n-1].End = i
		}
		turns = append(turns, Turn{Start: i, End: len(msgs)})
	}
	return turns
}

// preambleEnd is the index of the first user message, or len(msgs).
func preambleEnd(msgs []llm.Message) int {
	for i, m := range msgs {
		if m.StartsTurn() {
			return i
		}
	}
	return len(msgs)
}
