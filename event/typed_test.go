package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// samplePayloads are payloads of every event type, as a writer makes them:
// first the ones a session's owner writes (their strings valid, their raw
// JSON compact), then ones that encoding/json changes on the way to the log
// and back (an invalid UTF-8 string, raw JSON with spaces or with < > &,
// an empty slice or map it leaves out, a time with a zone).
func samplePayloads() map[Type][]any {
	args := json.RawMessage(`{"path":"a/b.txt","n":[1,2.5,-3e2],"deep":{"x":null,"y":true,"s":"é \"q\" \\ \n \u003c"}}`)
	call := llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: args}
	usage := llm.Usage{InputTokens: 120, OutputTokens: 7, CacheReadTokens: 3}
	temp := 0.25
	cfg := Config{SystemPrompt: "You are terse.", MaxSteps: 20, ContextChars: 4000, Model: "m-1"}
	ref := ArtifactRef{Bucket: "TAH_OBJ", Object: "s_1/a1", Size: 123456, SHA256: strings.Repeat("ab", 32)}
	deadline := time.Date(2026, 12, 2, 10, 0, 0, 5, time.UTC)
	return map[Type][]any{
		SessionCreated: {
			SessionCreatedData{Config: cfg, Labels: map[string]string{"team": "a", "é": "b"}},
			&SessionCreatedData{Config: Config{MaxSteps: 3}, ForkedFrom: "s_0"},
			SessionCreatedData{Config: cfg, Labels: map[string]string{}},            // left out: decodes as nil
			SessionCreatedData{Config: cfg, Labels: map[string]string{"k": "\xff"}}, // replaced by U+FFFD
		},
		SessionForked: {
			SessionForkedData{From: "s_0", FromSeq: 9, Turns: -1, Messages: []llm.Message{llm.System("sys"), llm.User("hi"), llm.Assistant("", call), llm.ToolResult(call, "out", false)}},
			SessionForkedData{From: "s_0", Messages: []llm.Message{}},
		},
		SessionClaimed: {SessionClaimedData{Epoch: 4, Node: "n-1", Config: cfg}},
		TurnStarted: {
			TurnStartedData{Turn: 1, Message: llm.User("list the files"), InputID: "in_1", MaxSteps: 5, Caller: &Caller{Protocol: "agents/0.3", ReplyTo: "_INBOX.x"}},
			TurnStartedData{Turn: 2, Message: llm.User("bad \xc3 byte")},
		},
		ToolsOffered: {ToolsOfferedData{Digest: mustDigest([]llm.ToolSchema{{Name: "read_file", Description: "Reads.", InputSchema: json.RawMessage(`{"type":"object"}`)}}),
			Tools: []llm.ToolSchema{{Name: "read_file", Description: "Reads.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}},
		LLMStarted: {
			LLMStartedData{StepID: "llm4.1", Turn: 1, RequestRef: RequestRef{History: 3, ContextChars: 4000, Model: "m-1", Tools: []string{"read_file"},
				ToolsDigest: strings.Repeat("cd", 32), RequestSHA256: strings.Repeat("ef", 32), Options: llm.Options{MaxTokens: 100, Temperature: &temp, Stop: []string{"END"}}},
				Trim: &TrimReport{Budget: 4000, BeforeChars: 5000, AfterChars: 3900, OutputsOmitted: 2}},
			LLMStartedData{StepID: "llm4.2", Turn: 1, RequestRef: RequestRef{History: 5, RequestSHA256: strings.Repeat("ef", 32), Tools: []string{}}},
		},
		LLMStreaming: {LLMStreamingData{StepID: "llm4.1"}},
		LLMCompleted: {
			LLMCompletedData{StepID: "llm4.1", Response: llm.Response{Model: "m-1", Content: "Let me look.", ToolCalls: []llm.ToolCall{call},
				FinishReason: llm.FinishToolCalls, Usage: usage}, DurationMS: 12, Cost: &pricing.Cost{USD: 0.001234567}},
			LLMCompletedData{StepID: "llm4.5", Response: llm.Response{Model: "local", Content: "ok", Usage: usage}, Cost: &pricing.Cost{Unpriced: 1}},
			&LLMCompletedData{StepID: "llm4.2", Response: llm.Response{Content: "done", Reasoning: "thought", FinishReason: llm.FinishStop}, Artifact: &ref},
			LLMCompletedData{StepID: "llm4.3", Response: llm.Response{ToolCalls: []llm.ToolCall{{ID: "c2", Name: "ls", Arguments: json.RawMessage(`{"path": "."}`)}}}},
			LLMCompletedData{StepID: "llm4.4", Response: llm.Response{ToolCalls: []llm.ToolCall{{ID: "c3", Name: "ls", Arguments: json.RawMessage(`{"q":"<b>&"}`)}}}},
		},
		LLMFailed: {LLMFailedData{StepID: "llm4.1", Error: "provider: 500", Code: CodeProvider, DurationMS: 3}},
		Thinking:  {ThinkingData{StepID: "think4.1", Content: "hmm"}},
		ToolStarted: {
			ToolStartedData{StepID: "tool4.2", Call: call, Idempotent: true, Runner: "local"},
			ToolStartedData{StepID: "tool4.3", Call: llm.ToolCall{ID: "c4", Name: "ls", Arguments: json.RawMessage{}}},
			ToolStartedData{StepID: "tool4.4", Call: llm.ToolCall{ID: "c5", Name: "ls"}},
		},
		ToolWaiting: {ToolWaitingData{StepID: "tool4.2", CallID: "call_1", Name: "read_file", WaitMS: 30000}},
		ToolApprovalRequested: {
			ToolApprovalRequestedData{Turn: 1, Calls: []llm.ToolCall{call}},
			ToolApprovalRequestedData{Turn: 1, Calls: []llm.ToolCall{call}, Deadline: deadline},
		},
		ToolApproved: {ToolApprovedData{CallID: "call_1", By: "ann", Note: "ok", Arguments: json.RawMessage(`{"path":"c.txt"}`)}},
		ToolDenied:   {ToolDeniedData{CallID: "call_1", By: "bob", Expired: true}},
		ToolFinished: {
			ToolFinishedData{StepID: "tool4.2", CallID: "call_1", Name: "read_file", Output: "line 1\nline \"2\" <tag> & more\u2028", DurationMS: 1},
			ToolFinishedData{StepID: "tool4.2", CallID: "call_1", Name: "read_file", Output: "a", IsError: true, Code: CodeToolError, Artifact: &ref},
			ToolFinishedData{StepID: "tool4.2", CallID: "call_1", Name: "read_file", Output: "binary \xff\xfe out"},
		},
		AgentFinished: {
			AgentFinishedData{Turn: 1, Content: "All done.", Steps: 3, Usage: usage, SessionUsage: &usage},
			AgentFinishedData{Turn: 2, Content: "Done.", Steps: 1, Usage: usage, SessionUsage: &usage,
				Cost: &pricing.Cost{USD: 0.1, Unpriced: 2}, SessionCost: &pricing.Cost{USD: 12.5, Unpriced: 3}},
		},
		AgentFailed: {AgentFailedData{Turn: 1, Error: "max steps", Code: CodeMaxSteps, Steps: 20},
			AgentFailedData{Turn: 2, Error: "over", Code: CodeBudgetExceeded, Steps: 2,
				Budget: &BudgetReached{Scope: ScopeSession, Kind: LimitCostUSD, From: FromSession, Limit: 1, Spent: 1.25}}},
		BudgetSet: {BudgetSetData{Budget: Budget{Turn: Limits{Tokens: 10}, Session: Limits{CostUSD: 2.5, TimeMS: 60000}}, TurnLimits: Limits{TimeMS: 5}, By: "ann"},
			BudgetSetData{}},
		TurnReopened:   {TurnReopenedData{Turn: 3, After: CodeBudgetExceeded}},
		AgentCancelled: {AgentCancelledData{Turn: 1, Reason: "user"}, AgentCancelledData{Turn: 2, Reason: "interrupted by input in-9", InterruptedBy: "in-9"}},
		TurnSteered:    {TurnSteeredData{Turn: 2, Message: llm.Message{Role: llm.RoleUser, Content: "the other file", Steer: true}, InputID: "in-8"}},
		TurnForked: {TurnForkedData{Turn: 2, Messages: []llm.Message{llm.User("list <files>"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ls", Arguments: json.RawMessage(`{"d": "."}`)}}}},
			AtStep: "llm-3", Steps: 1, MaxSteps: 5}},
		SessionEdited: {SessionEditedData{Message: 3, Role: llm.RoleTool, CallID: "c1", From: "a.txt", To: "a.txt & b.txt", IsError: new(bool), By: "ann"},
			SessionEditedData{Message: 1, Role: llm.RoleUser, From: "hi", To: "hello"}},
		ContextTrimmed: {ContextTrimmedData{StepID: "llm4.1", Report: TrimReport{Budget: 10, BeforeChars: 20, AfterChars: 9, TurnsDropped: 1, OverBudget: true}}},
		ContextCompacted: {ContextCompactedData{SessionID: "s_1", Turns: 2, Chars: 300, Auto: true,
			CompactionCall: CompactionCall{StepID: "llm4.9", Model: "m-1", Usage: usage, DurationMS: 40, Cost: &pricing.Cost{USD: 3e-9}}}},
		ContextCompactFailed: {ContextCompactFailedData{SessionID: "s_1", Error: "empty", Auto: true, Code: CodeEmptySummary, CompactionCall: CompactionCall{StepID: "llm4.9"}}},
		SummaryAdded:         {SummaryAddedData{Content: "[summary] earlier", At: 1, Turns: 2, Auto: true}},
		CheckpointCreated:    {CheckpointCreatedData{ID: "ck1", UpToSeq: 77, Bucket: "TAH_CK", Key: "s_1", Events: 64}},
		ArtifactCreated:      {ArtifactCreatedData{ID: "a1", Name: "out.txt", StepID: "tool4.2", CallID: "call_1", ContentType: "text/plain", Ref: ref}},
	}
}

func mustDigest(tools []llm.ToolSchema) string {
	d, err := ToolsDigest(tools)
	if err != nil {
		panic(err)
	}
	return d
}

// TestTypedAsDecode: for a payload of every event type, Typed gives what
// Decode gives of the event New made of it, the payloads that the encoding
// changes included (Typed then decodes); the ones a session's owner writes
// step after step are taken as they are (roundTrips), without decoding.
func TestTypedAsDecode(t *testing.T) {
	samples := samplePayloads()
	for _, typ := range Types() {
		if len(samples[typ]) == 0 {
			t.Errorf("no sample payload of %s", typ)
		}
		for i, p := range samples[typ] {
			e, err := New("s_1", typ, p)
			if err != nil {
				t.Fatalf("%s %d: %v", typ, i, err)
			}
			want, err := e.Decode()
			if err != nil {
				t.Fatalf("%s %d: %v", typ, i, err)
			}
			got, err := e.Typed(p)
			if err != nil {
				t.Fatalf("%s %d: Typed: %v", typ, i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %d: Typed\n%#v\nDecode\n%#v", typ, i, got, want)
			}
		}
	}
	// The step's events, as the loop writes them, are not decoded.
	for _, typ := range []Type{LLMStarted, LLMCompleted, ToolStarted, ToolFinished, TurnStarted, AgentFinished, ArtifactCreated, ToolsOffered} {
		p := samples[typ][0]
		if !roundTrips(reflect.Indirect(reflect.ValueOf(p)), false) {
			t.Errorf("%s %+v is decoded again", typ, p)
		}
	}
}

// TestTypedChecksAsDecode: Typed refuses what Decode refuses (the payload's
// own rules), and decodes when the payload given is not of the event's type.
func TestTypedChecksAsDecode(t *testing.T) {
	e := MustNew("s_1", ToolFinished, ToolFinishedData{CallID: "c1", Output: "x"})
	if _, err := e.Typed(ToolFinishedData{Output: "x"}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a tool.finished without call id: %v, want ErrMalformed", err)
	}
	got, err := e.Typed(LLMFailedData{StepID: "s"})
	if d, ok := got.(*ToolFinishedData); err != nil || !ok || d.CallID != "c1" {
		t.Errorf("a payload of another type: %#v %v, want the decoded tool.finished", got, err)
	}
	if got, err := e.Typed(nil); err != nil || got.(*ToolFinishedData).CallID != "c1" {
		t.Errorf("no payload: %#v %v", got, err)
	}
	unknown := Event{Type: "agent.dreamed", Data: json.RawMessage(`{}`)}
	if _, err := unknown.Typed(struct{}{}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
}

// TestRoundTripsRefuses: roundTrips says false of what it does not follow,
// or what the encoding changes, never true.
func TestRoundTripsRefuses(t *testing.T) {
	type withIface struct {
		A any `json:"a"`
	}
	type withString struct {
		N int `json:"n,string"`
	}
	type withCase struct {
		A string `json:"name"`
		B string `json:"Name"`
	}
	type withSkip struct {
		A string `json:"-"`
		b int
	}
	type withNullRaw struct {
		R json.RawMessage `json:"r"`
	}
	for _, v := range []any{
		withIface{A: 1}, withString{N: 1}, withCase{A: "x"}, withSkip{A: "x"}, withSkip{b: 1},
		withNullRaw{}, struct{ T time.Time }{T: time.Now()}, struct{ B []byte }{B: []byte{}},
		struct{ M map[int]string }{M: map[int]string{1: "a"}}, struct{ F float64 }{F: 0},
	} {
		ok := roundTrips(reflect.ValueOf(v), false)
		b, err := json.Marshal(v)
		back := reflect.New(reflect.TypeOf(v))
		same := err == nil && json.Unmarshal(b, back.Interface()) == nil && reflect.DeepEqual(back.Elem().Interface(), v)
		if ok && !same {
			t.Errorf("%#v: roundTrips, but comes back as %#v (%s)", v, back.Elem().Interface(), b)
		}
		if _, isFloat := v.(struct{ F float64 }); !ok && isFloat {
			t.Errorf("%#v: a float comes back", v)
		}
	}
}

// TestEncodeRecordAsMarshal: the body EncodeRecord builds is, byte for
// byte, json.Marshal of the Record, for events of every type, payloads that
// Marshal compacts or refuses, session ids and times of every kind; and it
// refuses what Marshal refuses.
func TestEncodeRecordAsMarshal(t *testing.T) {
	marshal := func(evs []Event) ([]byte, error) { // EncodeRecord as it was
		first := evs[0]
		r := Record{V: recordVersion(evs), Session: first.Session, Epoch: first.Epoch, Time: first.Time}
		for _, e := range evs {
			r.Events = append(r.Events, RecordEvent{Type: e.Type, Data: e.Data})
		}
		return json.Marshal(r)
	}
	at := time.Date(2026, 12, 2, 15, 4, 5, 123456700, time.UTC)
	var all []Event
	samples := samplePayloads()
	for _, typ := range Types() {
		for _, p := range samples[typ] {
			all = append(all, MustNew("s_1", typ, p))
		}
	}
	raw := func(data string) Event { return Event{Session: "s_1", Type: ToolFinished, Data: json.RawMessage(data)} }
	records := [][]Event{all}
	for _, e := range all {
		records = append(records, []Event{e})
	}
	for _, data := range []string{`{"output": "spaced"}`, `{"o":"<&>"}`, "{\"o\":\"\u2028\"}", `{"o":"\ud800"}`, `[1]`} {
		records = append(records, []Event{raw(data)}, []Event{all[0], raw(data)})
	}
	times := []time.Time{at, {}, at.Truncate(time.Second), at.In(time.FixedZone("CET", 3600)), at.In(time.FixedZone("Z0", 0)),
		time.Now(), time.Now().UTC(), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	sessions := []string{"s_1", "", "a<b>&c", "q\"uote\\", "é", "\xff", "tab\t", "del\x7f"}
	n := 0
	for _, recs := range records {
		for _, at := range times {
			for _, sid := range sessions[:1+len(sessions)*n%len(sessions)] {
				evs := make([]Event, len(recs))
				for i, e := range recs {
					e.Session, e.Time, e.Epoch = sid, at, uint64(n%3)
					evs[i] = e
				}
				n++
				want, werr := marshal(evs)
				got, err := EncodeRecord(evs)
				switch {
				case werr != nil:
					if !errors.Is(err, ErrMalformed) {
						t.Errorf("Marshal refuses %s (%v); EncodeRecord gives %s, %v", recordName(evs), werr, got, err)
					}
				case err != nil || string(got) != string(want):
					t.Errorf("record %s at %v of %q:\n got %s %v\nwant %s", recordName(evs), at, sid, got, err, want)
				}
			}
		}
	}
	for _, data := range []string{`{"a":`, ``, `{"a":1} x`} {
		if _, err := EncodeRecord([]Event{raw(data)}); !errors.Is(err, ErrMalformed) {
			t.Errorf("payload %q: %v, want ErrMalformed", data, err)
		}
	}
}

func recordName(evs []Event) string {
	names := make([]string, len(evs))
	for i, e := range evs {
		names[i] = string(e.Type)
	}
	return strings.Join(names, "+")
}

// BenchmarkStepEvents is what a session's owner does with one tool step's
// events after making them (New): fold them (Typed, as it now does, or
// Decode, as it did) and encode them as one record.
func BenchmarkStepEvents(b *testing.B) {
	s := samplePayloads()
	payloads := []any{s[ToolFinished][0], s[LLMStarted][0], s[LLMCompleted][0], s[ToolStarted][0]}
	evs := make([]Event, len(payloads))
	for i, typ := range []Type{ToolFinished, LLMStarted, LLMCompleted, ToolStarted} {
		evs[i] = MustNew("s_1", typ, payloads[i])
		evs[i].Time, evs[i].Epoch = time.Now().UTC(), 3
	}
	b.Run("New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, typ := range []Type{ToolFinished, LLMStarted, LLMCompleted, ToolStarted} {
				if _, err := New("s_1", typ, payloads[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, e := range evs {
				if _, err := e.Decode(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, e := range evs {
				if _, err := e.Typed(payloads[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("EncodeRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeRecord(evs); err != nil {
				b.Fatal(err)
			}
		}
	})
	body, err := EncodeRecord(evs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRecord(body, 7); err != nil {
				b.Fatal(err)
			}
		}
	})
}
