package event

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tah-dev/tah/internal/jsonx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// decoder is a payload that Decode reads without encoding/json: the four
// events of every tool step, which every reader of the log (a node's read
// model above all: tah-bench row 2) decodes again. decodeJSON reads b only
// when it is written as appendJSON writes (json.Marshal's form: its keys,
// in their order, no space), and then sets the payload to exactly what
// json.Unmarshal would (FuzzDecodeJSONAsUnmarshal); on anything else it
// leaves the payload zero and returns false, and Unmarshal reads b (a
// field this build does not know, another order, a null, whitespace).
type decoder interface {
	decodeJSON(b []byte) bool
}

var (
	_ decoder = (*LLMStartedData)(nil)
	_ decoder = (*LLMCompletedData)(nil)
	_ decoder = (*ToolStartedData)(nil)
	_ decoder = (*ToolFinishedData)(nil)
)

// unmarshalPayload is json.Unmarshal(b, p), through p's decodeJSON when it
// has one and it reads b.
func unmarshalPayload(b []byte, p any) error {
	if d, ok := p.(decoder); ok && d.decodeJSON(b) {
		return nil
	}
	return json.Unmarshal(b, p)
}

// reader reads JSON as Marshal writes it. Its first failure sticks: every
// later read fails too, so that a decoder checks ok once at its end.
type reader struct {
	b  []byte
	i  int
	ok bool
}

// done reports whether every read succeeded and b is read to its end.
func (r *reader) done() bool { return r.ok && r.i == len(r.b) }

func (r *reader) fail() { r.ok = false }

// byte_ reads c.
func (r *reader) byte_(c byte) {
	if r.ok && r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return
	}
	r.ok = false
}

// peek reports whether the next byte is c.
func (r *reader) peek(c byte) bool { return r.ok && r.i < len(r.b) && r.b[r.i] == c }

// key reads sep and "k": when they come next, and reports whether they did;
// it reads nothing otherwise (an optional key that is absent).
func (r *reader) key(sep byte, k string) bool {
	n := len(k) + 4
	if !r.ok || len(r.b)-r.i < n || r.b[r.i] != sep || r.b[r.i+1] != '"' ||
		string(r.b[r.i+2:r.i+2+len(k)]) != k || r.b[r.i+2+len(k)] != '"' || r.b[r.i+3+len(k)] != ':' {
		return false
	}
	r.i += n
	return true
}

// need is key for a key Marshal always writes.
func (r *reader) need(sep byte, k string) {
	if !r.key(sep, k) {
		r.ok = false
	}
}

// needStr, needInt and needInt64 read a key Marshal always writes and its
// value.
func (r *reader) needStr(sep byte, k string) string { r.need(sep, k); return r.str() }
func (r *reader) needInt(sep byte, k string) int    { r.need(sep, k); return r.int_() }
func (r *reader) needInt64(sep byte, k string) int64 {
	r.need(sep, k)
	return r.int64_()
}

// optStr, optInt, optInt64 and optTrue read the omitempty key ,"k": and its
// value when they come next, and give the zero value when they do not.
func (r *reader) optStr(k string) string {
	if !r.key(',', k) {
		return ""
	}
	return r.str()
}

func (r *reader) optInt(k string) int {
	if !r.key(',', k) {
		return 0
	}
	return r.int_()
}

func (r *reader) optInt64(k string) int64 {
	if !r.key(',', k) {
		return 0
	}
	return r.int64_()
}

func (r *reader) optTrue(k string) bool { return r.key(',', k) && r.true_() }

// str reads a string: its escapes decoded as Unmarshal decodes them; a
// surrogate escape (Unmarshal pairs them or replaces them) or invalid UTF-8
// (which Unmarshal replaces) fails.
func (r *reader) str() string {
	r.byte_('"')
	if !r.ok {
		return ""
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := string(r.b[start:r.i])
			r.i++
			return s
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			r.ok = false
			return ""
		case c < utf8.RuneSelf:
			r.i++
		default:
			rn, n := utf8.DecodeRune(r.b[r.i:])
			if rn == utf8.RuneError && n == 1 {
				r.ok = false
				return ""
			}
			r.i += n
		}
	}
	r.ok = false
	return ""
}

// escaped reads the rest of a string that began at start and has an escape
// at r.i.
func (r *reader) escaped(start int) string {
	out := make([]byte, 0, len(r.b)-start)
	out = append(out, r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out)
		case c == '\\':
			if r.i+1 >= len(r.b) {
				r.ok = false
				return ""
			}
			e := r.b[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if len(r.b)-r.i < 4 {
					r.ok = false
					return ""
				}
				v, err := strconv.ParseUint(string(r.b[r.i:r.i+4]), 16, 16)
				if err != nil || utf16.IsSurrogate(rune(v)) {
					r.ok = false
					return ""
				}
				out = utf8.AppendRune(out, rune(v))
				r.i += 4
			default:
				r.ok = false
				return ""
			}
		case c < 0x20:
			r.ok = false
			return ""
		case c < utf8.RuneSelf:
			out = append(out, c)
			r.i++
		default:
			rn, n := utf8.DecodeRune(r.b[r.i:])
			if rn == utf8.RuneError && n == 1 {
				r.ok = false
				return ""
			}
			out = append(out, r.b[r.i:r.i+n]...)
			r.i += n
		}
	}
	r.ok = false
	return ""
}

// int64_ reads an integer as Marshal writes one: no fraction, no exponent,
// no leading zero, within int64 (what Unmarshal refuses for an int fails).
func (r *reader) int64_() int64 {
	if !r.ok {
		return 0
	}
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	digits := r.i
	for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
		r.i++
	}
	if r.i == digits || r.b[digits] == '0' && r.i-digits > 1 {
		r.ok = false
		return 0
	}
	n, err := strconv.ParseInt(string(r.b[start:r.i]), 10, 64)
	if err != nil {
		r.ok = false
	}
	return n
}

// int_ is int64_ within int.
func (r *reader) int_() int {
	n := r.int64_()
	if int64(int(n)) != n {
		r.ok = false
	}
	return int(n)
}

// float reads a number as Unmarshal reads one into a float64.
func (r *reader) float() float64 {
	if !r.ok {
		return 0
	}
	end, ok := jsonx.NumberEnd(r.b, r.i)
	if !ok {
		r.ok = false
		return 0
	}
	f, err := strconv.ParseFloat(string(r.b[r.i:end]), 64)
	if err != nil {
		r.ok = false
	}
	r.i = end
	return f
}

// true_ reads true: Marshal writes an omitempty bool only when it is.
func (r *reader) true_() bool {
	if r.ok && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "true" {
		r.i += 4
		return true
	}
	r.ok = false
	return false
}

// raw reads one value as Marshal writes a json.RawMessage, and returns a
// copy of its bytes, as Unmarshal does.
func (r *reader) raw() json.RawMessage {
	if !r.ok {
		return nil
	}
	end, ok := jsonx.ValueEnd(r.b, r.i)
	if !ok {
		r.ok = false
		return nil
	}
	v := json.RawMessage(append([]byte(nil), r.b[r.i:end]...))
	r.i = end
	return v
}

func (r *reader) strings() []string {
	r.byte_('[')
	var out []string
	if r.peek(']') {
		r.i++
		return []string{}
	}
	for r.ok {
		out = append(out, r.str())
		if !r.peek(',') {
			break
		}
		r.i++
	}
	r.byte_(']')
	return out
}

// options reads sampling options, which Marshal writes when any is set.
func (r *reader) options() (o llm.Options) {
	sep := byte('{')
	if r.key(sep, "max_tokens") {
		o.MaxTokens, sep = r.int_(), ','
	}
	if r.key(sep, "temperature") {
		f := r.float()
		o.Temperature, sep = &f, ','
	}
	if r.key(sep, "top_p") {
		f := r.float()
		o.TopP, sep = &f, ','
	}
	if r.key(sep, "stop") {
		o.Stop = r.strings()
	} else if sep == '{' {
		// {}: a Stop of no element, which Marshal leaves out and
		// Unmarshal leaves nil.
		r.byte_('{')
	}
	r.byte_('}')
	return o
}

func (r *reader) toolCall() (c llm.ToolCall) {
	c.ID = r.needStr('{', "id")
	c.Name = r.needStr(',', "name")
	if r.key(',', "arguments") {
		c.Arguments = r.raw()
	}
	r.byte_('}')
	return c
}

func (r *reader) artifact() *ArtifactRef {
	var a ArtifactRef
	a.Bucket = r.needStr('{', "bucket")
	a.Object = r.needStr(',', "object")
	a.Size = r.needInt64(',', "size")
	a.SHA256 = r.optStr("sha256")
	r.byte_('}')
	return &a
}

// outcome is what a decodeJSON returns: whether r read all of b; when it did
// not, *p is set back to zero for Unmarshal.
func outcome[T any](r *reader, p *T) bool {
	if r.done() {
		return true
	}
	var zero T
	*p = zero
	return false
}

func (d *LLMStartedData) decodeJSON(b []byte) bool {
	r := &reader{b: b, ok: true}
	d.StepID = r.needStr('{', "step_id")
	d.Turn = r.needInt(',', "turn")
	d.History = r.needInt(',', "history")
	d.ContextChars = r.optInt("context_chars")
	d.Model = r.optStr("model")
	if r.key(',', "options") {
		d.Options = r.options()
	}
	if r.key(',', "tools") {
		d.Tools = r.strings()
	}
	d.ToolsDigest = r.optStr("tools_digest")
	d.RequestSHA256 = r.needStr(',', "request_sha256")
	if r.key(',', "trim") {
		t := new(TrimReport)
		t.Budget = r.needInt('{', "budget")
		t.BeforeChars = r.needInt(',', "before_chars")
		t.AfterChars = r.needInt(',', "after_chars")
		t.OutputsOmitted = r.optInt("outputs_omitted")
		t.TurnsDropped = r.optInt("turns_dropped")
		t.CurrentOutputsOmitted = r.optInt("current_outputs_omitted")
		t.OverBudget = r.optTrue("over_budget")
		r.byte_('}')
		d.Trim = t
	}
	r.byte_('}')
	return outcome(r, d)
}

func (d *LLMCompletedData) decodeJSON(b []byte) bool {
	r := &reader{b: b, ok: true}
	d.StepID = r.needStr('{', "step_id")
	r.need(',', "response")
	resp := &d.Response
	sep := byte('{')
	if r.key(sep, "model") {
		resp.Model, sep = r.str(), ','
	}
	if r.key(sep, "content") {
		resp.Content, sep = r.str(), ','
	}
	if r.key(sep, "reasoning") {
		resp.Reasoning, sep = r.str(), ','
	}
	if r.key(sep, "tool_calls") {
		r.byte_('[')
		for r.ok {
			resp.ToolCalls = append(resp.ToolCalls, r.toolCall())
			if !r.peek(',') {
				break
			}
			r.i++
		}
		r.byte_(']')
		sep = ','
	}
	if r.key(sep, "finish_reason") {
		resp.FinishReason, sep = llm.FinishReason(r.str()), ','
	}
	r.need(sep, "usage")
	resp.Usage.InputTokens = r.needInt('{', "input_tokens")
	resp.Usage.OutputTokens = r.needInt(',', "output_tokens")
	resp.Usage.CacheReadTokens = r.optInt("cache_read_tokens")
	r.byte_('}')
	r.byte_('}')
	if r.key(',', "artifact") {
		d.Artifact = r.artifact()
	}
	d.DurationMS = r.optInt64("duration_ms")
	if r.key(',', "cost") {
		c := new(pricing.Cost)
		r.need('{', "usd")
		c.USD = r.float()
		c.Unpriced = r.optInt("unpriced")
		r.byte_('}')
		d.Cost = c
	}
	r.byte_('}')
	return outcome(r, d)
}

func (d *ToolStartedData) decodeJSON(b []byte) bool {
	r := &reader{b: b, ok: true}
	d.StepID = r.needStr('{', "step_id")
	r.need(',', "call")
	d.Call = r.toolCall()
	d.Idempotent = r.optTrue("idempotent")
	d.Runner = r.optStr("runner")
	r.byte_('}')
	return outcome(r, d)
}

func (d *ToolFinishedData) decodeJSON(b []byte) bool {
	r := &reader{b: b, ok: true}
	d.StepID = r.needStr('{', "step_id")
	d.CallID = r.needStr(',', "call_id")
	d.Name = r.needStr(',', "name")
	d.Output = r.needStr(',', "output")
	d.IsError = r.optTrue("is_error")
	d.Code = r.optStr("code")
	if r.key(',', "artifact") {
		d.Artifact = r.artifact()
	}
	d.DurationMS = r.optInt64("duration_ms")
	r.byte_('}')
	return outcome(r, d)
}

// decodeJSON reads a record's body as EncodeRecord writes it (a record of
// version 2 and later, not a version 1 envelope), setting b to what
// json.Unmarshal would; on anything else it leaves b zero and returns false.
// The events' payloads are slices of one copy of raw, where Unmarshal copied
// each.
func (b *body) decodeJSON(raw []byte) bool {
	r := &reader{b: raw, ok: true}
	b.V = r.needInt('{', "v")
	b.Session = r.needStr(',', "session")
	if r.key(',', "epoch") {
		b.Epoch = uint64(r.int64_())
		if int64(b.Epoch) < 0 {
			r.fail()
		}
	}
	r.need(',', "time")
	start := r.i
	r.str()
	if r.ok && b.Time.UnmarshalJSON(raw[start:r.i]) != nil {
		r.fail()
	}
	r.need(',', "events")
	r.byte_('[')
	// At least one {"type": per event (more where a raw payload holds one
	// too): room for every event at once.
	b.Events = make([]RecordEvent, 0, bytes.Count(raw[r.i:], []byte(`{"type":`)))
	var copied []byte
	for r.ok {
		var e RecordEvent
		r.need('{', "type")
		e.Type = Type(r.str())
		r.need(',', "data")
		at := r.i
		end, ok := jsonx.ValueEnd(raw, at)
		if !r.ok || !ok {
			r.fail()
			break
		}
		if copied == nil {
			copied = append([]byte(nil), raw...)
		}
		e.Data = json.RawMessage(copied[at:end:end])
		r.i = end
		r.byte_('}')
		b.Events = append(b.Events, e)
		if !r.peek(',') {
			break
		}
		r.i++
	}
	r.byte_(']')
	r.byte_('}')
	return outcome(r, b)
}
