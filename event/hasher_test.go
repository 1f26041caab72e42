package event_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// The hasher gives RequestSHA256's hash whatever the requests it is given in
// turn: a history that grows, one trimmed or changed in the middle, another
// model, other tools, no messages.
func TestRequestHasher(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tools := []llm.ToolSchema{{Name: "read", Description: "reads <files> & more", InputSchema: json.RawMessage(`{"type": "object"}`)}}
	var h event.RequestHasher
	var history []llm.Message
	for step := range 400 {
		switch rng.IntN(6) {
		case 0:
			history = append(history, llm.User(fmt.Sprintf("question %d <b>", step)))
		case 1:
			c := llm.ToolCall{ID: fmt.Sprintf("c%d", step), Name: "read", Arguments: json.RawMessage(`{ "path" : "a&b" }`)}
			history = append(history, llm.Assistant("", c), llm.ToolResult(c, strings.Repeat("o", rng.IntN(50)), rng.IntN(2) == 0))
		case 2:
			history = append(history, llm.Assistant(fmt.Sprintf("answer %d", step)))
		case 3:
			if len(history) > 2 { // a trimmed copy: a message in the middle changes
				history = append([]llm.Message(nil), history...)
				history[len(history)/2].Content = "[omitted]"
			}
		}
		req := llm.Request{Model: []string{"", "m1", `m"2`}[rng.IntN(3)], Messages: history}
		if rng.IntN(2) == 0 {
			req.Tools = tools
		}
		if rng.IntN(5) == 0 {
			req.Messages = nil
		}
		want, err := event.RequestSHA256(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.Sum(req)
		if err != nil || got != want {
			t.Fatalf("step %d: Sum = %s, %v; RequestSHA256 = %s", step, got, err, want)
		}
	}
}
