package event

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"

	"github.com/tah-dev/tah/internal/jsonx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// appender is a payload whose JSON New writes without encoding/json: the
// four events of every tool step (llm.started, llm.completed, tool.started,
// tool.finished), whose encoding through Marshal's reflection was a tenth of
// a step's CPU (tah-bench row 2). appendJSON appends what json.Marshal
// writes of the payload, byte for byte (TestAppendJSONAsMarshal,
// FuzzAppendJSONAsMarshal); ok false leaves the payload to Marshal, for
// what it writes rarely and this code would only copy (a float that is not
// finite, a raw value Marshal must compact or refuse, a request recorded
// whole).
type appender interface {
	appendJSON(b []byte) (_ []byte, ok bool)
}

var (
	_ appender = LLMStartedData{}
	_ appender = LLMCompletedData{}
	_ appender = ToolStartedData{}
	_ appender = ToolFinishedData{}
)

func (d LLMStartedData) appendJSON(b []byte) ([]byte, bool) {
	if !requestIsZero(d.Request) {
		return b, false
	}
	b = slices.Grow(b, 320+len(d.StepID)+len(d.Model)+len(d.ToolsDigest)+len(d.RequestSHA256)+16*len(d.Tools))
	b = appendString(b, '{', "step_id", d.StepID)
	b = appendInt(b, ',', "turn", int64(d.Turn))
	b = append(b, ',')
	b, ok := d.RequestRef.appendFields(b)
	if !ok {
		return b, false
	}
	if t := d.Trim; t != nil {
		b = appendKey(b, ',', "trim")
		b = appendInt(b, '{', "budget", int64(t.Budget))
		b = appendInt(b, ',', "before_chars", int64(t.BeforeChars))
		b = appendInt(b, ',', "after_chars", int64(t.AfterChars))
		b = appendIntOmitEmpty(b, "outputs_omitted", int64(t.OutputsOmitted))
		b = appendIntOmitEmpty(b, "turns_dropped", int64(t.TurnsDropped))
		b = appendIntOmitEmpty(b, "current_outputs_omitted", int64(t.CurrentOutputsOmitted))
		b = appendTrueOmitEmpty(b, "over_budget", t.OverBudget)
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// AppendJSON appends r as json.Marshal writes it (see llm.ToolCall.AppendJSON).
func (r RequestRef) AppendJSON(b []byte) ([]byte, bool) {
	b = slices.Grow(b, 160+len(r.Model)+len(r.ToolsDigest)+len(r.RequestSHA256)+16*len(r.Tools))
	b = append(b, '{')
	b, ok := r.appendFields(b)
	return append(b, '}'), ok
}

// appendFields appends r's fields, as its JSON object holds them and as
// LLMStartedData's holds them inline.
func (r RequestRef) appendFields(b []byte) (_ []byte, ok bool) {
	b = append(b, `"history":`...)
	b = strconv.AppendInt(b, int64(r.History), 10)
	b = appendIntOmitEmpty(b, "context_chars", int64(r.ContextChars))
	b = appendStringOmitEmpty(b, "model", r.Model)
	if !optionsIsZero(r.Options) {
		b = appendKey(b, ',', "options")
		if b, ok = appendOptions(b, r.Options); !ok {
			return b, false
		}
	}
	if len(r.Tools) > 0 {
		b = appendKey(b, ',', "tools")
		b = appendStrings(b, r.Tools)
	}
	b = appendStringOmitEmpty(b, "tools_digest", r.ToolsDigest)
	b = appendString(b, ',', "request_sha256", r.RequestSHA256)
	return b, true
}

func (d LLMCompletedData) appendJSON(b []byte) ([]byte, bool) {
	r := &d.Response
	size := 200 + len(d.StepID) + len(r.Model) + len(r.Content) + len(r.Reasoning)
	for _, c := range r.ToolCalls {
		size += 40 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	b = slices.Grow(b, size)
	b = appendString(b, '{', "step_id", d.StepID)
	b = appendKey(b, ',', "response")
	b, ok := d.Response.AppendJSON(b)
	if !ok {
		return b, false
	}
	if d.Artifact != nil {
		b = appendKey(b, ',', "artifact")
		b = appendArtifact(b, *d.Artifact)
	}
	b = appendIntOmitEmpty(b, "duration_ms", d.DurationMS)
	if d.Cost != nil {
		b = appendKey(b, ',', "cost")
		if b, ok = appendCost(b, *d.Cost); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func (d ToolStartedData) appendJSON(b []byte) ([]byte, bool) {
	b = slices.Grow(b, 96+len(d.StepID)+len(d.Call.ID)+len(d.Call.Name)+len(d.Call.Arguments)+len(d.Runner))
	b = appendString(b, '{', "step_id", d.StepID)
	b = appendKey(b, ',', "call")
	b, ok := d.Call.AppendJSON(b)
	if !ok {
		return b, false
	}
	b = appendTrueOmitEmpty(b, "idempotent", d.Idempotent)
	b = appendStringOmitEmpty(b, "runner", d.Runner)
	return append(b, '}'), true
}

func (d ToolFinishedData) appendJSON(b []byte) ([]byte, bool) {
	b = slices.Grow(b, 160+len(d.StepID)+len(d.CallID)+len(d.Name)+len(d.Output)+len(d.Code))
	b = appendString(b, '{', "step_id", d.StepID)
	b = appendString(b, ',', "call_id", d.CallID)
	b = appendString(b, ',', "name", d.Name)
	b = appendString(b, ',', "output", d.Output)
	b = appendTrueOmitEmpty(b, "is_error", d.IsError)
	b = appendStringOmitEmpty(b, "code", d.Code)
	if d.Artifact != nil {
		b = appendKey(b, ',', "artifact")
		b = appendArtifact(b, *d.Artifact)
	}
	b = appendIntOmitEmpty(b, "duration_ms", d.DurationMS)
	return append(b, '}'), true
}

// appendKey appends sep ('{' or ',') and the object key k, which needs no
// escaping (this file's keys, all constants), with its colon.
func appendKey(b []byte, sep byte, k string) []byte {
	b = append(b, sep, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

// appendInt appends sep, the key k and n.
func appendInt(b []byte, sep byte, k string, n int64) []byte {
	return strconv.AppendInt(appendKey(b, sep, k), n, 10)
}

// appendIntOmitEmpty appends ,"k":n unless n is 0 (omitempty).
func appendIntOmitEmpty(b []byte, k string, n int64) []byte {
	if n == 0 {
		return b
	}
	return appendInt(b, ',', k, n)
}

// appendString appends sep, the key k and v.
func appendString(b []byte, sep byte, k, v string) []byte {
	return jsonx.AppendString(appendKey(b, sep, k), v)
}

// appendStringOmitEmpty appends ,"k":v unless v is empty (omitempty).
func appendStringOmitEmpty(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(b, ',', k, v)
}

// appendTrueOmitEmpty appends ,"k":true when v is (omitempty).
func appendTrueOmitEmpty(b []byte, k string, v bool) []byte {
	if !v {
		return b
	}
	return append(appendKey(b, ',', k), "true"...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonx.AppendString(b, s)
	}
	return append(b, ']')
}

func appendArtifact(b []byte, a ArtifactRef) []byte {
	b = appendString(b, '{', "bucket", a.Bucket)
	b = appendString(b, ',', "object", a.Object)
	b = appendInt(b, ',', "size", a.Size)
	b = appendStringOmitEmpty(b, "sha256", a.SHA256)
	return append(b, '}')
}

func appendCost(b []byte, c pricing.Cost) ([]byte, bool) {
	b = appendKey(b, '{', "usd")
	b, ok := jsonx.AppendFloat(b, c.USD)
	b = appendIntOmitEmpty(b, "unpriced", int64(c.Unpriced))
	return append(b, '}'), ok
}

func appendOptions(b []byte, o llm.Options) ([]byte, bool) {
	sep := byte('{')
	if o.MaxTokens != 0 {
		b = appendKey(b, sep, "max_tokens")
		b = strconv.AppendInt(b, int64(o.MaxTokens), 10)
		sep = ','
	}
	for _, f := range []struct {
		k string
		v *float64
	}{{"temperature", o.Temperature}, {"top_p", o.TopP}} {
		if f.v == nil {
			continue
		}
		var ok bool
		b = appendKey(b, sep, f.k)
		if b, ok = jsonx.AppendFloat(b, *f.v); !ok {
			return b, false
		}
		sep = ','
	}
	if len(o.Stop) > 0 {
		b = appendKey(b, sep, "stop")
		b = appendStrings(b, o.Stop)
		sep = ','
	}
	if sep == '{' { // a Stop of no element: not zero, and nothing to write
		b = append(b, '{')
	}
	return append(b, '}'), true
}

// optionsIsZero is omitzero's test of o: every field zero (no IsZero method).
func optionsIsZero(o llm.Options) bool {
	return o.MaxTokens == 0 && o.Temperature == nil && o.TopP == nil && o.Stop == nil
}

// requestIsZero is omitzero's test of r.
func requestIsZero(r llm.Request) bool {
	return r.Model == "" && r.Messages == nil && r.Tools == nil && optionsIsZero(r.Options)
}

// marshalPayload is json.Marshal(data), through data's appendJSON when it
// has one and it writes data.
func marshalPayload(data any) ([]byte, error) {
	if a, ok := data.(appender); ok && !nilPointer(data) {
		if b, ok := a.appendJSON(nil); ok {
			return b, nil
		}
	}
	return json.Marshal(data)
}

// nilPointer reports whether v is a nil pointer (its value methods panic).
func nilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
