package event

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
)

// TestDigestsAreCanonical: the same request or tool list hashes the same
// whatever the whitespace of its raw JSON, before and after a trip through
// the log; anything else changes the hash.
func TestDigestsAreCanonical(t *testing.T) {
	spaced := []llm.ToolSchema{{Name: "a", Description: "<a> & b", InputSchema: json.RawMessage("{ \"type\": \"object\",\n \"description\": \"<x>\" }")}}
	d1, err := ToolsDigest(spaced)
	if err != nil {
		t.Fatal(err)
	}
	ev := MustNew("s", ToolsOffered, ToolsOfferedData{Digest: d1, Tools: spaced})
	logged, err := DecodeAs[ToolsOfferedData](ev)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := ToolsDigest(logged.Tools); d2 != d1 || len(d1) != 64 {
		t.Fatalf("digest %s before the log, %s after", d1, d2)
	}
	if d, _ := ToolsDigest(nil); d != "" {
		t.Fatalf("no tools: digest %q", d)
	}

	req := llm.Request{Model: "m", Messages: []llm.Message{llm.User("hi <there>")}, Tools: spaced}
	h1, err := RequestSHA256(req)
	if err != nil {
		t.Fatal(err)
	}
	req.Tools = logged.Tools
	if h2, _ := RequestSHA256(req); h2 != h1 {
		t.Fatalf("request hash %s with the live tools, %s with the logged ones", h1, h2)
	}
	req.Messages[0].Content = "hi <there>!"
	if h3, _ := RequestSHA256(req); h3 == h1 {
		t.Fatal("a different request hashes the same")
	}
	if _, err := RequestSHA256(llm.Request{Tools: []llm.ToolSchema{{Name: "x", InputSchema: json.RawMessage("{nope")}}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("invalid raw JSON: %v", err)
	}
}

// TestToolsOfferedChecksItsDigest: a tools.offered whose digest is not its
// tools' is malformed.
func TestToolsOfferedChecksItsDigest(t *testing.T) {
	tools := []llm.ToolSchema{{Name: "a"}}
	for name, d := range map[string]ToolsOfferedData{
		"wrong digest": {Digest: strings.Repeat("0", 64), Tools: tools},
		"no tools":     {Digest: ""},
	} {
		if _, err := MustNew("s", ToolsOffered, d).Decode(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLLMStartedRecordedWhole: an llm.started of a log written before
// requests were recorded by reference still decodes, with its request.
func TestLLMStartedRecordedWhole(t *testing.T) {
	e := Event{Session: "s", Type: LLMStarted, Data: json.RawMessage(`{"step_id":"st1","turn":1,"request":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`)}
	d, err := DecodeAs[LLMStartedData](e)
	if err != nil || !d.Recorded() || d.Request.Messages[0].Content != "hi" {
		t.Fatalf("%+v %v", d, err)
	}
	ref := MustNew("s", LLMStarted, LLMStartedData{StepID: "st2", RequestRef: RequestRef{History: 2, RequestSHA256: strings.Repeat("a", 64)}})
	if strings.Contains(string(ref.Data), `"request"`) {
		t.Fatalf("a reference writes a request: %s", ref.Data)
	}
	if d, _ := DecodeAs[LLMStartedData](ref); d.Recorded() {
		t.Fatal("a reference reads as a request recorded whole")
	}
}
