package event_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
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

// TestRequestHasherGrown: SumGrown gives RequestSHA256's hash for the
// requests of a long session whose history grows in one array (as
// projection.State's does), interleaved with requests that are not of that
// array (a trimmed copy), others of other tools or options, and tools and
// options that the caller changes in place between two steps (the hasher
// must not take its copy of them for theirs).
func TestRequestHasherGrown(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	temp := 0.5
	tools := []llm.ToolSchema{{Name: "read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	opts := llm.Options{MaxTokens: 100, Temperature: &temp, Stop: []string{"END"}}
	var h event.RequestHasher
	history := make([]llm.Message, 0, 4) // grows into new arrays too
	history = append(history, llm.System("sys"), llm.User("go"))
	for step := range 500 {
		c := llm.ToolCall{ID: fmt.Sprintf("c%d", step), Name: "read", Arguments: json.RawMessage(`{"n":1}`)}
		history = append(history, llm.Assistant("", c), llm.ToolResult(c, strings.Repeat("o", rng.IntN(20)), false))
		req := llm.Request{Model: "m", Messages: history, Tools: tools, Options: opts}
		grown := true
		switch rng.IntN(10) {
		case 0: // a trimmed copy
			req.Messages = append([]llm.Message(nil), history...)
			req.Messages[len(history)/2].Content = "[omitted]"
			grown = false
		case 1: // the caller changes its tools in place
			tools[0].InputSchema[2] = "xy"[rng.IntN(2)]
		case 2: // its options in place
			*opts.Temperature = float64(rng.IntN(3))
			opts.Stop[0] = []string{"END", "STOP"}[rng.IntN(2)]
		case 3:
			req.Tools = nil
		case 4:
			req.Model = "m2"
		}
		want, err := event.RequestSHA256(req)
		if err != nil {
			t.Fatal(err)
		}
		sum := h.Sum
		if grown {
			sum = h.SumGrown
		}
		got, err := sum(req)
		if err != nil || got != want {
			t.Fatalf("step %d: %s, %v; RequestSHA256 = %s", step, got, err, want)
		}
	}
}

// TestFrameCopiesEveryField: the hasher compares and copies the tools and
// options of a request field by field, and the messages it hashed: a field
// added to those types must be added there (hasher.go: sameTools,
// cloneTools, sameOptions, cloneOptions; llm.SameMessage), or a request that
// differs only by it would be given the hash of the last one.
func TestFrameCopiesEveryField(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want int
	}{{reflect.TypeFor[llm.ToolSchema](), 3}, {reflect.TypeFor[llm.Options](), 4}, {reflect.TypeFor[llm.Message](), 7}, {reflect.TypeFor[llm.ToolCall](), 3}} {
		if got := c.typ.NumField(); got != c.want {
			t.Errorf("%v has %d fields, the hasher knows %d of them", c.typ, got, c.want)
		}
	}
}
