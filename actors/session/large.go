package session

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// What the log keeps of large answers and tool results. An llm.completed or
// tool.finished whose payload would be over a quarter of the server's max
// payload (2 MiB of the default 8 MiB) keeps a cut copy, and the whole goes
// to the object store, referred to by the event's artifact: so that no event
// is too large for a record, whatever the model or a tool sends, and a record
// of several such events still fits in a few messages (see
// AgentContext.write).
const (
	// inlineShare is the share of the max payload one answer or result may
	// take in the log: its payload is at most MaxPayload/inlineShare bytes.
	inlineShare = 4
	// answerPreview is how many characters of a cut answer's content, and of
	// its reasoning, the log keeps.
	answerPreview = 16 << 10
	// artifactTimeout bounds storing the whole of an answer or result.
	artifactTimeout = time.Minute
)

// inlineLimit is the largest payload, in bytes, of an answer or result that
// the log keeps whole.
func (a *AgentContext) inlineLimit() int { return a.writer.Bus().MaxPayload() / inlineShare }

// completed is the llm.completed of resp, the answer to req, at step stepID,
// with its cost at the node's prices. An answer too large
// for the log is stored whole (its llm.Response as JSON) and the event holds
// a copy whose content and reasoning are cut, each with a note naming the
// artifact. It fails with llm.ErrAnswerTooLarge when even the cut copy is too
// large (the arguments of its tool calls, which cannot be cut), and with
// another error when the whole could not be stored.
func (a *AgentContext) completed(ctx context.Context, stepID string, req llm.Request, resp llm.Response, took int64) (event.LLMCompletedData, error) {
	d := event.LLMCompletedData{StepID: stepID, Response: resp, DurationMS: took, Cost: a.cost(req, resp)}
	limit := a.inlineLimit()
	if completedBound(d) <= limit || payloadSize(d) <= limit {
		return d, nil
	}
	whole, err := json.Marshal(resp)
	if err != nil {
		return d, fmt.Errorf("session %s: the answer of %s cannot be stored: %w", a.Session, stepID, err)
	}
	ref, err := a.putArtifact(ctx, path.Join("steps", a.Session, stepID, "response.json"), whole)
	if err != nil {
		return d, err
	}
	d.Artifact = &ref
	where := fmt.Sprintf("the whole answer is artifact %s/%s", ref.Bucket, ref.Object)
	if len(resp.Content) > answerPreview {
		d.Response.Content = tools.Truncate("answer", resp.Content, answerPreview, where)
	}
	if len(resp.Reasoning) > answerPreview {
		d.Response.Reasoning = tools.Truncate("reasoning", resp.Reasoning, answerPreview, where)
	}
	if size := payloadSize(d); size > limit {
		return d, fmt.Errorf("the model's tool calls take %d bytes, over the %d bytes the log keeps of one answer: ask the model for smaller pieces (the whole answer is artifact %s/%s): %w",
			size, limit, ref.Bucket, ref.Object, llm.ErrAnswerTooLarge)
	}
	return d, nil
}

// fitResult is d, a tool.finished, with its output cut when the payload is
// too large for the log: the whole output goes to the object store (unless
// d already refers to an artifact that holds it), and the output keeps a
// preview and a note naming it. Tools run by the executor are cut already
// (tools.Options.MaxOutput); this catches the rest: a larger MaxOutput, a
// tool service's stored result, a tool that set its own artifact.
func (a *AgentContext) fitResult(ctx context.Context, d event.ToolFinishedData) (event.ToolFinishedData, error) {
	if limit := a.inlineLimit(); finishedBound(d) <= limit || payloadSize(d) <= limit {
		return d, nil
	}
	if d.Artifact == nil {
		name := tools.ArtifactName(tools.CallInfo{Session: a.Session, ID: d.CallID, Name: d.Name}, "output.txt")
		ref, err := a.putArtifact(ctx, name, []byte(d.Output))
		if err != nil {
			return d, err
		}
		d.Artifact = &ref
	}
	where := fmt.Sprintf("the full output is artifact %s/%s", d.Artifact.Bucket, d.Artifact.Object)
	d.Output = tools.Truncate("output", d.Output, tools.DefaultPreview, where)
	return d, nil
}

// putArtifact stores data in the object store under name, even when ctx was
// cancelled: what it keeps is referred to by an event about to be written.
func (a *AgentContext) putArtifact(ctx context.Context, name string, data []byte) (event.ArtifactRef, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), artifactTimeout)
	defer cancel()
	ref, err := a.writer.Bus().PutArtifactBytes(pctx, name, data)
	if err != nil {
		return ref, fmt.Errorf("session %s: %d bytes too large for the log could not be kept in the object store: %w", a.Session, len(data), err)
	}
	return ref, nil
}

// A bound on the size of a payload's JSON, from the bytes of its strings
// and raw JSON values: JSON escapes a byte into at most six ("\u003c"), and
// keys, numbers and punctuation take less than payloadOverhead a payload and
// callOverhead a tool call. Under the limit, an answer or a result skips the
// encoding payloadSize makes only to measure it (5% of a step's CPU in make
// bench's row 2: every answer was encoded twice).
const (
	escapedMax      = 6
	payloadOverhead = 2048
	callOverhead    = 128
)

// completedBound is at least the size of d's payload (see escapedMax).
func completedBound(d event.LLMCompletedData) int {
	r := d.Response
	n := len(d.StepID) + len(r.Model) + len(r.Content) + len(r.Reasoning) + len(r.FinishReason) + artifactBytes(d.Artifact)
	for _, c := range r.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return escapedMax*n + payloadOverhead + callOverhead*len(r.ToolCalls)
}

// finishedBound is at least the size of d's payload (see escapedMax).
func finishedBound(d event.ToolFinishedData) int {
	n := len(d.StepID) + len(d.CallID) + len(d.Name) + len(d.Output) + len(d.Code) + artifactBytes(d.Artifact)
	return escapedMax*n + payloadOverhead
}

// artifactBytes is the bytes of ref's strings, 0 without one.
func artifactBytes(ref *event.ArtifactRef) int {
	if ref == nil {
		return 0
	}
	return len(ref.Bucket) + len(ref.Object) + len(ref.SHA256)
}

// payloadSize is the size of v encoded as an event's payload; -1 when it
// does not encode (the append reports that).
func payloadSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return len(b)
}
