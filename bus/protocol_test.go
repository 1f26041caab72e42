package bus

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// fenceRE finds the fenced blocks: JSON examples, headers (no language) and
// code in other languages (skipped).
var fenceRE = regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```")

// strict decodes raw into v refusing unknown fields.
func strict(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestProtocolExamples checks the examples of docs/protocol.md against the Go
// types they describe, more strictly than the JSON Schemas: no unknown field,
// every field that the Go type always writes present, and input examples
// accepted by the node's parser with their headers.
func TestProtocolExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	checkExamples(t, doc)
}

// TestProtocolExamplesCheck: the check above catches the mistakes it is for.
func TestProtocolExamplesCheck(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(string) string{
		"missing required field": func(d string) string {
			return strings.Replace(d, `"max_steps": 20, "context_chars": 60000}, "labels"`, `"context_chars": 60000}, "labels"`, 1)
		},
		"unknown field": func(d string) string { return strings.Replace(d, `"duration_ms": 840`, `"duration": 840`, 1) },
		"bad input": func(d string) string {
			return strings.Replace(d, `"reason": "the user pressed Ctrl-C"`, `"input": "x"`, 1)
		},
		"missing example": func(d string) string {
			return strings.Replace(d, `"type": "llm.streaming"`, `"type": "llm.started"`, 1)
		},
	} {
		mutated := bad(string(doc))
		if mutated == string(doc) {
			t.Fatalf("%s: the mutation does not apply: update this test", name)
		}
		var r recorder
		checkExamples(&r, []byte(mutated))
		if r.errors == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

// reporter is the part of testing.T that checkExamples uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// recorder counts errors instead of failing a test.
type recorder struct{ errors int }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func checkExamples(t reporter, doc []byte) {
	seen := map[event.Type]bool{}
	var inputs, deltas, errs, refs int
	var prevPlain string // the last fenced block without a language: headers
	for _, m := range fenceRE.FindAllSubmatch(doc, -1) {
		lang, body := string(m[1]), m[2]
		switch lang {
		case "":
			prevPlain = string(body)
			continue
		case "json":
		default:
			continue // code
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(body, &probe) != nil {
			t.Errorf("example is not a JSON object:\n%s", body)
			continue
		}
		headers := prevPlain
		prevPlain = ""
		switch {
		case probe["$schema"] != nil:
			// an inline JSON Schema
		case probe["v"] != nil && probe["events"] != nil:
			var rec event.Record
			if err := strict(body, &rec); err != nil || rec.V < 2 || rec.V > event.SchemaVersion {
				t.Errorf("record example (version %d): %v\n%s", rec.V, err, body)
				continue
			}
			evs, err := event.DecodeRecord(body, 1)
			if err != nil {
				t.Errorf("record example: %v\n%s", err, body)
				continue
			}
			for _, ev := range evs {
				checkEvent(t, ev, seen)
			}
		case probe["type"] != nil && probe["data"] != nil && probe["session"] != nil:
			var ev event.Event
			if err := strict(body, &ev); err != nil {
				t.Errorf("event example: %v\n%s", err, body)
				continue
			}
			checkEvent(t, ev, seen)
		case strings.Contains(headers, wire.HeaderCommand+":"):
			msg := nats.NewMsg("tah.in.0.s_x")
			for _, line := range strings.Split(strings.TrimSpace(headers), "\n") {
				k, v, _ := strings.Cut(line, ":")
				msg.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			msg.Data = body
			var raw wire.Input
			if err := strict(body, &raw); err != nil {
				t.Errorf("input example: %v\n%s", err, body)
			}
			in, err := parseInput(msg, 1)
			if err != nil {
				t.Errorf("input example refused: %v\n%s\n%s", err, headers, body)
			}
			// Nats-Msg-Id is "<sid>:<id>": the session and the body's id.
			msgID := msg.Header.Get(wire.HeaderMsgID)
			sid, _, _ := strings.Cut(msgID, ":")
			if event.ValidSessionID(sid) != nil || msgID != wire.InputMsgID(sid, in.ID) {
				t.Errorf("input example: id %q, Nats-Msg-Id %q", in.ID, msgID)
			}
			inputs++
		case probe["step_id"] != nil && probe["session"] == nil: // a delta (a step's request names its session)
			var d wire.Delta
			if err := strict(body, &d); err != nil {
				t.Errorf("delta example: %v\n%s", err, body)
			}
			deltas++
		case string(probe["status"]) == `"refused"`:
			var o wire.Outcome
			if err := strict(body, &o); err != nil || o.FailureCode == "" || o.Failure == "" {
				t.Errorf("refusal example: %v\n%s", err, body)
			}
			errs++
		case probe["bucket"] != nil && probe["object"] != nil:
			var ref event.ArtifactRef
			if err := strict(body, &ref); err != nil || len(ref.SHA256) != 64 {
				t.Errorf("artifact reference example: %v\n%s", err, body)
			}
			refs++
		}
	}
	for _, typ := range event.Types() {
		if !seen[typ] {
			t.Errorf("docs/protocol.md has no example of %s", typ)
		}
	}
	if inputs < 4 || deltas < 1 || errs < 1 || refs < 1 {
		t.Errorf("examples checked: %d inputs, %d deltas, %d refusals, %d artifact references", inputs, deltas, errs, refs)
	}
}

// checkEvent checks an event example's payload against its Go type, and
// records its type as seen.
func checkEvent(t reporter, ev event.Event, seen map[event.Type]bool) {
	t.Helper()
	p := event.Payload(ev.Type)
	if p == nil {
		t.Errorf("event example of unknown type %q", ev.Type)
		return
	}
	if err := strict(ev.Data, p); err != nil {
		t.Errorf("%s example: %v", ev.Type, err)
		return
	}
	if _, err := ev.Decode(); err != nil {
		t.Errorf("%s example: %v", ev.Type, err)
	}
	if again, _ := json.Marshal(p); !sameJSON(again, ev.Data) {
		t.Errorf("%s example differs from what Go writes (a missing required field, or a zero optional one?):\n doc %s\n  go %s", ev.Type, ev.Data, again)
	}
	if err := event.ValidSessionID(ev.Session); err != nil {
		t.Errorf("%s example: %v", ev.Type, err)
	}
	seen[ev.Type] = true
}
