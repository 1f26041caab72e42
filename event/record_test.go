package event

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

// TestRecordRoundTrip: the events of a record come back in order, sharing the
// record's sequence, session, epoch and time, each with its index.
func TestRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 15, 0, 123456789, time.UTC)
	evs := []Event{
		MustNew("s_1", LLMCompleted, LLMCompletedData{StepID: "st_1", Response: llm.Response{Content: "hi"}}),
		MustNew("s_1", ToolStarted, ToolStartedData{StepID: "st_2", Call: llm.ToolCall{ID: "c1", Name: "ls"}}),
		MustNew("s_1", ToolStarted, ToolStartedData{StepID: "st_3", Call: llm.ToolCall{ID: "c2", Name: "ls"}}),
	}
	for i := range evs {
		evs[i].Epoch = 3
	}
	evs[0].Time = at
	body, err := EncodeRecord(evs)
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := json.Unmarshal(body, &r); err != nil || r.V != 2 || len(r.Events) != 3 || r.Session != "s_1" {
		t.Fatalf("body %s: %+v %v", body, r, err)
	}
	back, err := DecodeRecord(body, 7)
	if err != nil || len(back) != 3 {
		t.Fatal(back, err)
	}
	for i, e := range back {
		if e.Seq != 7 || e.Index != i || e.Session != "s_1" || e.Epoch != 3 || !e.Time.Equal(at) || e.Type != evs[i].Type ||
			string(e.Data) != string(evs[i].Data) {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if !back[0].Before(back[1]) || back[1].Before(back[0]) || back[1].Before(back[1]) || !back[2].Before(Event{Seq: 8}) {
		t.Error("Before does not order by sequence, then index")
	}
}

// TestRecordVersion3: a record that holds tool.waiting is of version 3 (an
// older build stops there, as needing a newer node); one without stays 2.
func TestRecordVersion3(t *testing.T) {
	waiting := MustNew("s_1", ToolWaiting, ToolWaitingData{StepID: "st_2", CallID: "c1", Name: "slow_write", WaitMS: 30000})
	started := MustNew("s_1", ToolStarted, ToolStartedData{StepID: "st_2", Call: llm.ToolCall{ID: "c1", Name: "slow_write"}})
	for _, c := range []struct {
		evs  []Event
		want int
	}{{[]Event{started}, 2}, {[]Event{started, waiting}, 3}} {
		body, err := EncodeRecord(c.evs)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		if err := json.Unmarshal(body, &r); err != nil || r.V != c.want {
			t.Fatalf("record of %d events: version %d, want %d (%v)", len(c.evs), r.V, c.want, err)
		}
		back, err := DecodeRecord(body, 4)
		if err != nil || len(back) != len(c.evs) {
			t.Fatal(back, err)
		}
	}
}

// TestDecodeVersion1: a body written before records (one event envelope) is
// a record of one event.
func TestDecodeVersion1(t *testing.T) {
	body := `{"session":"s_1","type":"turn.started","time":"2026-11-30T10:15:00Z","epoch":2,` +
		`"data":{"turn":1,"message":{"role":"user","content":"hi"}}}`
	evs, err := DecodeRecord([]byte(body), 9)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	e := evs[0]
	if e.Seq != 9 || e.Index != 0 || e.Session != "s_1" || e.Epoch != 2 || e.Type != TurnStarted || e.Time.IsZero() {
		t.Fatalf("%+v", e)
	}
	if d, err := DecodeAs[TurnStartedData](e); err != nil || d.Message.Content != "hi" {
		t.Fatal(d, err)
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	for _, c := range []struct {
		body string
		want error
	}{
		{``, ErrMalformed},
		{`{`, ErrMalformed},
		{`[]`, ErrMalformed},
		{`null`, ErrMalformed},
		{`{"session":"s"}`, ErrMalformed},
		{`{"v":2,"session":"s","time":"2026-11-30T10:15:00Z","events":[]}`, ErrMalformed},
		{`{"v":2,"session":"s","time":"2026-11-30T10:15:00Z","events":[{"data":{}}]}`, ErrMalformed},
		{`{"v":1,"session":"s","type":"turn.started","data":{}}`, ErrMalformed},
		{`{"v":8,"session":"s","events":[{"type":"x","data":{}}]}`, ErrNewerSchema},
	} {
		if _, err := DecodeRecord([]byte(c.body), 1); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.body, err, c.want)
		}
	}
}

func TestEncodeRecordRejects(t *testing.T) {
	a := MustNew("s_1", AgentCancelled, AgentCancelledData{Turn: 1})
	b := MustNew("s_2", AgentCancelled, AgentCancelledData{Turn: 1})
	c := a
	c.Epoch = 4
	for name, evs := range map[string][]Event{"none": nil, "two sessions": {a, b}, "two epochs": {a, c}} {
		if _, err := EncodeRecord(evs); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
