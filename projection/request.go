package projection

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Errors of RebuildRequest.
var (
	// ErrUnknownStep: the log has no step of that id.
	ErrUnknownStep = errors.New("unknown step")
	// ErrNotLLMStep: the step is a tool or thinking step; only LLM steps send
	// a request.
	ErrNotLLMStep = errors.New("not an LLM step")
	// ErrNotRebuildable: the step's llm.started records neither its request nor
	// a reference to it, or refers to what the log does not hold before it
	// (a tools.offered, messages).
	ErrNotRebuildable = errors.New("request cannot be rebuilt from the log")
)

// StepRequest is the request of an LLM step and what the log records of it.
type StepRequest struct {
	// Request is what the step sends.
	Request llm.Request
	// Ref is what llm.started records of Request, its hash included.
	Ref event.RequestRef
	// Trim reports what trimming cut from the history.
	Trim event.TrimReport
	// Offer, when not nil, is the tools.offered to append before llm.started:
	// the session last offered other tools, or none.
	Offer *event.ToolsOfferedData
	// Turn is the session's turn.
	Turn int
}

// Started is the llm.started of the step stepID that sends r: its reference,
// and the trim report when anything was cut or the budget was not met.
func (r StepRequest) Started(stepID string) event.LLMStartedData {
	d := event.LLMStartedData{StepID: stepID, Turn: r.Turn, RequestRef: r.Ref}
	if r.Trim.Trimmed() || r.Trim.OverBudget {
		report := r.Trim
		d.Trim = &report
	}
	return d
}

// NextRequest is the request the next LLM step of session st sends, offering
// tools: the session's history prepared for its context budget (Prepare),
// with its model. A state that holds a window of its history (Elided) gives
// the request of the whole history, or ErrHistoryNeeded when that sends
// some of what the window left out. The loop appends Offer (when set), then llm.started with
// Ref; RebuildRequest gets the same request back from the log, because
// llm.started's History is every message folded before it.
//
// h, when not nil, hashes the request: one hasher per session takes each
// step's hash up where the previous step's left it (event.RequestHasher).
func NextRequest(st *State, tools []llm.ToolSchema, h *event.RequestHasher) (StepRequest, error) {
	digest, err := st.toolsDigest(tools)
	if err != nil {
		return StepRequest{}, err
	}
	ref := event.RequestRef{History: st.HistoryLen(), ContextChars: st.Config.ContextChars,
		Model: st.Config.Model, ToolsDigest: digest}
	for _, t := range tools {
		ref.Tools = append(ref.Tools, t.Name)
	}
	sent, report, ok := st.prepare(ref.ContextChars)
	if !ok {
		return StepRequest{}, fmt.Errorf("request of %d messages, %d of them elided: %w", ref.History, st.Elided.Messages, ErrHistoryNeeded)
	}
	req := requestOf(sent, ref, tools)
	if h == nil {
		h = new(event.RequestHasher)
	}
	if len(sent) > 0 && len(st.Messages) > 0 && &sent[0] == &st.Messages[0] {
		// The history sent as it is: Apply never writes a message of it again
		// (insertMessage), so the hasher need not compare those it hashed.
		ref.RequestSHA256, err = h.SumGrown(req)
	} else {
		ref.RequestSHA256, err = h.Sum(req)
	}
	if err != nil {
		return StepRequest{}, err
	}
	out := StepRequest{Request: req, Ref: ref, Trim: report, Turn: st.Turn}
	if digest != "" && digest != st.ToolsOffered {
		out.Offer = &event.ToolsOfferedData{Digest: digest, Tools: tools}
	}
	return out, nil
}

// requestOf is the request ref describes, that sends the messages sent (the
// history prepared for ref's budget: Prepare) and offers tools: the one
// rule NextRequest and RebuildRequest share.
func requestOf(sent []llm.Message, ref event.RequestRef, tools []llm.ToolSchema) llm.Request {
	return llm.Request{Model: ref.Model, Messages: sent, Tools: tools, Options: ref.Options}
}

// Rebuilt is an LLM step's request as RebuildRequest found it.
type Rebuilt struct {
	Request llm.Request
	// SHA256 is the hash llm.started recorded of the request (of a request
	// recorded whole, its own).
	SHA256 string
	// Verified reports whether Request hashes to SHA256: it is, byte for
	// byte, the request the step sent.
	Verified bool
	// Recorded is true when llm.started holds the whole request (a log
	// written before requests were recorded by reference): nothing was
	// rebuilt.
	Recorded bool
}

// RebuildRequest returns the request that LLM step stepID sent, from its
// session's events (the log from its start, in order). It folds the events up
// to the step's llm.started, takes the History messages it names, prepares
// them with the recorded budget as NextRequest did, with the recorded model,
// options and the tools of the tools.offered its digest names, and checks the
// result against the recorded hash: a rebuild that differs is returned with
// Verified false. Events the fold refuses are skipped, as the writer's own
// fold skipped them. Errors wrap ErrUnknownStep, ErrNotLLMStep or
// ErrNotRebuildable.
func RebuildRequest(events []event.Event, stepID string) (Rebuilt, error) {
	var st State
	offered := map[string][]llm.ToolSchema{}
	for _, e := range events {
		switch e.Type {
		case event.ToolsOffered:
			if d, err := event.DecodeAs[event.ToolsOfferedData](e); err == nil {
				offered[d.Digest] = d.Tools
			}
		case event.LLMStarted:
			if d, err := event.DecodeAs[event.LLMStartedData](e); err == nil && d.StepID == stepID {
				return rebuild(st.Messages, d, offered)
			}
		}
		_ = Apply(&st, e) // a refused event changed nothing, for the writer either
	}
	if s := st.Step(stepID); s != nil {
		return Rebuilt{}, fmt.Errorf("step %s is a %s step, %w", stepID, s.Type, ErrNotLLMStep)
	}
	return Rebuilt{}, fmt.Errorf("step %s: %w", stepID, ErrUnknownStep)
}

// RebuildStarted is RebuildRequest's rebuild of the llm.started d, for a
// reader that folds the log itself (package replay, which walks a whole
// log once): history is the session's messages folded before d
// (State.Messages), offered the tools of the log's tools.offered before d,
// by digest.
func RebuildStarted(history []llm.Message, d event.LLMStartedData, offered map[string][]llm.ToolSchema) (Rebuilt, error) {
	return rebuild(history, d, offered)
}

// rebuild is the request of the llm.started d, whose session had history
// when it was written, with the tool lists offered before it.
func rebuild(history []llm.Message, d event.LLMStartedData, offered map[string][]llm.ToolSchema) (Rebuilt, error) {
	if d.Recorded() {
		sum, err := event.RequestSHA256(d.Request)
		return Rebuilt{Request: d.Request, SHA256: sum, Verified: err == nil, Recorded: true}, err
	}
	ref := d.RequestRef
	switch {
	case ref.RequestSHA256 == "":
		return Rebuilt{}, fmt.Errorf("llm.started of step %s records neither its request nor a hash of it: %w", d.StepID, ErrNotRebuildable)
	case ref.History < 0 || ref.History > len(history):
		return Rebuilt{}, fmt.Errorf("llm.started of step %s names %d messages of history, the log has %d before it: %w",
			d.StepID, ref.History, len(history), ErrNotRebuildable)
	}
	var tools []llm.ToolSchema
	if ref.ToolsDigest != "" {
		var ok bool
		if tools, ok = offered[ref.ToolsDigest]; !ok {
			return Rebuilt{}, fmt.Errorf("llm.started of step %s offers the tools of digest %s, and no tools.offered before it records them: %w",
				d.StepID, ref.ToolsDigest, ErrNotRebuildable)
		}
	}
	sent, _ := Prepare(history[:ref.History], ref.ContextChars)
	req := requestOf(sent, ref, tools)
	sum, err := event.RequestSHA256(req)
	if err != nil {
		return Rebuilt{}, err
	}
	return Rebuilt{Request: req, SHA256: ref.RequestSHA256, Verified: sum == ref.RequestSHA256}, nil
}

// toolsMemo is the digest of the tools a state's last request offered, with
// a copy of them.
type toolsMemo struct {
	tools  []llm.ToolSchema
	digest string
	ok     bool
}

// toolsDigest is event.ToolsDigest(tools), encoded and hashed again only
// when the tools differ from those of the last request: a session offers
// the same tools step after step, and their encoding and hash were the
// biggest part of a request's work after its history's.
func (s *State) toolsDigest(tools []llm.ToolSchema) (string, error) {
	m := &s.tools
	if m.ok && sameTools(m.tools, tools) {
		return m.digest, nil
	}
	d, err := event.ToolsDigest(tools)
	if err != nil {
		return "", err
	}
	// A copy: the caller may change its schemas in place later.
	kept := make([]llm.ToolSchema, len(tools))
	for i, t := range tools {
		t.InputSchema = bytes.Clone(t.InputSchema)
		kept[i] = t
	}
	*m = toolsMemo{tools: kept, digest: d, ok: true}
	return d, nil
}

// sameTools reports whether a and b encode alike.
func sameTools(a, b []llm.ToolSchema) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description ||
			!bytes.Equal(a[i].InputSchema, b[i].InputSchema) || (a[i].InputSchema == nil) != (b[i].InputSchema == nil) {
			return false
		}
	}
	return true
}
