package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/llm/llmtest"
)

// scaleTool is the tool row 9's model calls once a turn: one of the
// built-in tools every tah-node has, on the harness's small project.
const scaleTool = "list_files"

// scaleModel is row 9's model: an OpenAI-compatible server (Chat
// Completions, streamed or not, in llmtest's encoding) in the bench's
// process, outside the nodes' quotas, that answers every request after
// delay, as a real provider does over HTTP: a call of scaleTool when the
// conversation does not end with a tool's result, else a short answer. A
// turn is then one tool step and a final step.
type scaleModel struct {
	delay time.Duration
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
	// answered counts the requests answered in full: the LLM steps.
	answered atomic.Int64
	failed   atomic.Int64
}

// startScaleModel serves the model on a free loopback port until close.
func startScaleModel(delay time.Duration) (*scaleModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("row 9's model: %w", err)
	}
	m := &scaleModel{delay: delay, ln: ln, done: make(chan struct{})}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { // owned by the model: ends when close shuts the server down
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// baseURL is the nodes' llm.base_url.
func (m *scaleModel) baseURL() string { return "http://" + m.ln.Addr().String() + "/v1" }

func (m *scaleModel) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		_ = m.srv.Close()
	}
	<-m.done
}

// scaleRequest is what the model reads of a request.
type scaleRequest struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
}

func (m *scaleModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req scaleRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		m.failed.Add(1)
		http.Error(w, fmt.Sprintf("row 9's model: %s %s: %v", r.Method, r.URL.Path, err), http.StatusBadRequest)
		return
	}
	a := llmtest.Answer{Model: "bench-scale", Text: []string{"done"}, Usage: llmtest.Usage{Input: 100, Output: 5}}
	if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != "tool" {
		a.Text = nil
		a.Calls = []llmtest.Call{{ID: fmt.Sprintf("call_%d", m.answered.Load()), Name: scaleTool, Args: []string{`{}`}}}
	}
	select {
	case <-time.After(m.delay):
	case <-r.Context().Done():
		m.failed.Add(1)
		return
	}
	enc := llmtest.OpenAI{}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, err = w.Write(enc.Body(a))
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
		var b strings.Builder
		for _, part := range [][]string{enc.Head(a), enc.Pieces(a), enc.Tail(a)} {
			for _, ev := range part {
				b.WriteString(ev)
			}
		}
		_, err = io.WriteString(w, b.String())
	}
	if err != nil {
		m.failed.Add(1)
		return
	}
	m.answered.Add(1)
}
