package event

import (
	"math"
	"unicode/utf8"

	"github.com/tah-dev/tah/internal/jsonx"
	"github.com/tah-dev/tah/llm"
)

// roundTripper is a payload that says without reflection that it comes
// back from its JSON as it is (what roundTrips finds by reflection, a
// thousand nanoseconds a payload in a step's fold): the four payloads of a
// tool step. surelyRoundTrips true is always right (FuzzSurelyRoundTrips
// holds it to roundTrips); false leaves the question to roundTrips (a
// request recorded whole, sampling options, a value this code does not
// follow), so that Typed gives what it gave.
type roundTripper interface {
	surelyRoundTrips() bool
}

var (
	_ roundTripper = LLMStartedData{}
	_ roundTripper = LLMCompletedData{}
	_ roundTripper = ToolStartedData{}
	_ roundTripper = ToolFinishedData{}
)

func (d LLMStartedData) surelyRoundTrips() bool {
	if !requestIsZero(d.Request) || !optionsIsZero(d.Options) || d.Tools != nil && len(d.Tools) == 0 {
		return false
	}
	for _, t := range d.Tools {
		if !utf8.ValidString(t) {
			return false
		}
	}
	return validStrings(d.StepID, d.Model, d.ToolsDigest, d.RequestSHA256)
}

func (d LLMCompletedData) surelyRoundTrips() bool {
	r := &d.Response
	if r.ToolCalls != nil && len(r.ToolCalls) == 0 ||
		d.Cost != nil && (math.IsNaN(d.Cost.USD) || math.IsInf(d.Cost.USD, 0)) ||
		d.Artifact != nil && !d.Artifact.surelyRoundTrips() {
		return false
	}
	for _, c := range r.ToolCalls {
		if !toolCallRoundTrips(c) {
			return false
		}
	}
	return validStrings(d.StepID, r.Model, r.Content, r.Reasoning, string(r.FinishReason))
}

func (d ToolStartedData) surelyRoundTrips() bool {
	return toolCallRoundTrips(d.Call) && validStrings(d.StepID, d.Runner)
}

func (d ToolFinishedData) surelyRoundTrips() bool {
	return (d.Artifact == nil || d.Artifact.surelyRoundTrips()) && validStrings(d.StepID, d.CallID, d.Name, d.Output, d.Code)
}

func (a ArtifactRef) surelyRoundTrips() bool { return validStrings(a.Bucket, a.Object, a.SHA256) }

// toolCallRoundTrips: valid strings, and arguments either nil (left out,
// decoded nil) or in Marshal's form (copied both ways as they are).
func toolCallRoundTrips(c llm.ToolCall) bool {
	return validStrings(c.ID, c.Name) && (c.Arguments == nil || len(c.Arguments) > 0 && jsonx.MarshalForm(c.Arguments))
}

func validStrings(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// typedFast is Typed's answer for a payload p of type T (or *T) that
// surely round-trips: a pointer to a copy of it, validated. ok is false
// when Typed must look further.
func typedFast[T interface {
	roundTripper
	validate() error
}](p any) (out *T, ok bool) {
	var v T
	switch q := p.(type) {
	case T:
		v = q
	case *T:
		if q == nil {
			return nil, false
		}
		v = *q
	default:
		return nil, false
	}
	if !v.surelyRoundTrips() {
		return nil, false
	}
	return &v, true
}

// typedFast is typedFast[T] for e's type, when it is a tool step's.
func (e Event) typedFast(p any) (any, bool) {
	var out any
	var ok bool
	switch e.Type {
	case LLMStarted:
		out, ok = typedFastAny[LLMStartedData](p)
	case LLMCompleted:
		out, ok = typedFastAny[LLMCompletedData](p)
	case ToolStarted:
		out, ok = typedFastAny[ToolStartedData](p)
	case ToolFinished:
		out, ok = typedFastAny[ToolFinishedData](p)
	}
	return out, ok
}

// typedFastAny is typedFast[T] as an any that is nil when not ok.
func typedFastAny[T interface {
	roundTripper
	validate() error
}](p any) (any, bool) {
	if v, ok := typedFast[T](p); ok {
		return v, true
	}
	return nil, false
}
