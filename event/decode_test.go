package event

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
)

// stepPayloads makes a zero payload of each type that has a decodeJSON.
var stepPayloads = map[Type]func() decoder{
	LLMStarted:   func() decoder { return new(LLMStartedData) },
	LLMCompleted: func() decoder { return new(LLMCompletedData) },
	ToolStarted:  func() decoder { return new(ToolStartedData) },
	ToolFinished: func() decoder { return new(ToolFinishedData) },
}

// wantAsUnmarshal fails t unless decodeJSON of b, when it reads b, gives
// what json.Unmarshal gives, and leaves the payload zero when it does not.
// It reports whether decodeJSON read b.
func wantAsUnmarshal(t *testing.T, typ Type, b []byte) (fast bool) {
	t.Helper()
	got := stepPayloads[typ]()
	fast = got.decodeJSON(b)
	if !fast {
		if zero := stepPayloads[typ](); !reflect.DeepEqual(got, zero) {
			t.Fatalf("decodeJSON(%s) of %s refused it and left %#v", typ, b, got)
		}
		return false
	}
	want := stepPayloads[typ]()
	if err := json.Unmarshal(b, want); err != nil {
		t.Fatalf("decodeJSON(%s) read %s; Unmarshal refuses it: %v", typ, b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON(%s) of %s = %#v, Unmarshal gives %#v", typ, b, got, want)
	}
	return true
}

func TestDecodeJSONAsUnmarshal(t *testing.T) {
	s := samplePayloads()
	for typ := range stepPayloads {
		for i, p := range s[typ] {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			fast := wantAsUnmarshal(t, typ, b)
			if i == 0 && !fast {
				t.Errorf("decodeJSON(%s) left a step's payload to Unmarshal: %s", typ, b)
			}
			// Each prefix, and the payload with a byte changed, as hostile input.
			for n := range b {
				wantAsUnmarshal(t, typ, b[:n])
				c := append([]byte(nil), b...)
				c[n] ^= 0x20
				wantAsUnmarshal(t, typ, c)
			}
		}
	}
	for typ, b := range map[Type]string{
		ToolFinished: `{"step_id":"t","call_id":"c","name":"n","output":"\ud83d\ude00"}`, // a surrogate pair: left to Unmarshal
		ToolStarted:  `{"step_id":"t","call":{"id":"c","name":"n"},"idempotent":false}`,
		LLMStarted:   `{"step_id":"l","turn":1,"history":2,"request_sha256":"x","request":{"messages":[]}}`,
	} {
		if wantAsUnmarshal(t, typ, []byte(b)) {
			t.Errorf("decodeJSON(%s) read %s, which is not as Marshal writes", typ, b)
		}
	}
}

// FuzzDecodeJSONAsUnmarshal holds decodeJSON to Unmarshal on any bytes:
// what it reads it reads as Unmarshal does.
func FuzzDecodeJSONAsUnmarshal(f *testing.F) {
	for _, ps := range samplePayloads() {
		for _, p := range ps {
			if b, err := json.Marshal(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"step_id":"s","turn":-0,"history":01,"request_sha256":""}`))
	f.Add([]byte(`{"step_id":"s","response":{"usage":{"input_tokens":1,"output_tokens":2}},"cost":{"usd":1e400}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for typ := range stepPayloads {
			wantAsUnmarshal(t, typ, b)
		}
	})
}

// recordAsUnmarshal fails t unless body.decodeJSON of raw, when it reads
// raw, gives what json.Unmarshal gives, and leaves the body zero when it
// does not. It reports whether decodeJSON read raw.
func recordAsUnmarshal(t *testing.T, raw []byte) (fast bool) {
	t.Helper()
	var got, want body
	if !got.decodeJSON(raw) {
		if !reflect.DeepEqual(got, body{}) {
			t.Fatalf("decodeJSON of the record %s refused it and left %#v", raw, got)
		}
		return false
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("decodeJSON read the record %s; Unmarshal refuses it: %v", raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON of the record %s = %#v, Unmarshal gives %#v", raw, got, want)
	}
	return true
}

// sampleRecords are records of every sample payload, one event each, and
// one of a step's events.
func sampleRecords(t testing.TB) [][]byte {
	var out [][]byte
	at := time.Date(2026, 12, 7, 19, 0, 0, 123456789, time.UTC)
	add := func(evs ...Event) {
		raw, err := EncodeRecord(evs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	var step []Event
	for typ, ps := range samplePayloads() {
		for _, p := range ps {
			e := MustNew("s_1", typ, p)
			e.Time, e.Epoch = at, 3
			add(e)
			if _, ok := stepPayloads[typ]; ok {
				step = append(step, e)
			}
		}
	}
	add(step...)
	e := MustNew("s_1", TurnStarted, TurnStartedData{Turn: 1, Message: llm.User("hi")})
	e.Time = at.In(time.FixedZone("x", 3600)) // no epoch, a zone of its own
	add(e)
	return out
}

func TestDecodeRecordAsUnmarshal(t *testing.T) {
	for _, raw := range sampleRecords(t) {
		if !recordAsUnmarshal(t, raw) {
			t.Errorf("decodeJSON left the record %s to Unmarshal", raw)
		}
		for n := range raw {
			recordAsUnmarshal(t, raw[:n])
			c := append([]byte(nil), raw...)
			c[n] ^= 0x20
			recordAsUnmarshal(t, c)
		}
	}
	// A version 1 envelope is Unmarshal's.
	if recordAsUnmarshal(t, []byte(`{"session":"s_1","type":"turn.started","time":"2026-12-07T19:00:00Z","data":{}}`)) {
		t.Error("decodeJSON read a version 1 envelope")
	}
}

func FuzzDecodeRecordAsUnmarshal(f *testing.F) {
	for _, raw := range sampleRecords(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		recordAsUnmarshal(t, raw)
	})
}
