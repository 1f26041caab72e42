package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"go.opentelemetry.io/otel/trace/noop"
)

// streamer is a provider that streams its tokens at once, then answers when
// release is closed or fails when its context ends (cancelled records that).
type streamer struct {
	tokens    []string
	streamed  chan struct{} // closed once every token was handed over
	release   chan struct{}
	cancelled chan struct{}
}

func (s *streamer) Name() string { return "test" }

func (s *streamer) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	return s.Stream(ctx, req, func(llm.Delta) {})
}

func (s *streamer) Stream(ctx context.Context, _ llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	text := ""
	for _, tok := range s.tokens {
		onDelta(llm.Delta{Text: tok})
		text += tok
	}
	close(s.streamed)
	select {
	case <-s.release:
		return llm.Response{Content: text, FinishReason: llm.FinishStop}, nil
	case <-ctx.Done():
		close(s.cancelled)
		return llm.Response{}, ctx.Err()
	}
}

// deltaLog is a Watcher that records the deltas it is given.
type deltaLog struct {
	mu    sync.Mutex
	texts []string
}

func (w *deltaLog) Event(*projection.State, event.Event) {}
func (w *deltaLog) End(*projection.State, error)         {}
func (w *deltaLog) Delta(_ string, d llm.Delta) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, d.Text)
}

func (w *deltaLog) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

func newStreamer(tokens ...string) *streamer {
	return &streamer{tokens: tokens, streamed: make(chan struct{}), release: make(chan struct{}), cancelled: make(chan struct{})}
}

// A step's model call runs while its llm.started is written, but nothing of
// it is seen before: its deltas wait for answer, then go out in order.
func TestModelCallHoldsDeltasUntilTheStepIsWritten(t *testing.T) {
	p := newStreamer("It ", "is ", "done.")
	w := &deltaLog{}
	a := &AgentContext{Provider: p, now: time.Now, watcher: w, log: quiet}
	call := askModel(context.Background(), a, "llm1.1", llm.Request{}, noop.Span{})
	// The call has streamed everything it will before its answer; nothing of
	// it may be out yet.
	select {
	case <-p.streamed:
	case <-time.After(hangBound):
		t.Fatal("the call did not stream")
	}
	if got := w.seen(); len(got) != 0 {
		t.Fatalf("deltas seen before the step's start was written: %q", got)
	}
	close(p.release)
	resp, _, err := call.answer()
	if err != nil || resp.Content != "It is done." {
		t.Fatalf("answer %+v, %v", resp, err)
	}
	if got := w.seen(); !slices.Equal(got, []string{"It ", "is ", "done."}) {
		t.Fatalf("deltas after the write: %q", got)
	}
}

// A step whose start cannot be written drops its call: the call is
// cancelled, and nothing it streamed is published.
func TestModelCallDroppedWhenTheStepIsNotWritten(t *testing.T) {
	p := newStreamer("lost")
	w := &deltaLog{}
	a := &AgentContext{Provider: p, now: time.Now, watcher: w, log: quiet}
	call := askModel(context.Background(), a, "llm1.1", llm.Request{}, noop.Span{})
	call.drop()
	select {
	case <-p.cancelled:
	default:
		t.Fatal("the dropped call was not cancelled")
	}
	if got := w.seen(); len(got) != 0 {
		t.Fatalf("a dropped call's deltas were published: %q", got)
	}
	if !errors.Is(call.err, context.Canceled) {
		t.Fatalf("the dropped call ended with %v", call.err)
	}
}
