package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/openai"
)

// A server that streams an answer without end is stopped once the answer is
// over llm.MaxAnswerBytes: the call fails with ErrAnswerTooLarge, the
// connection is closed, and no delta past the bound reaches the caller.
func TestEndlessAnswerIsStoppedAtTheBound(t *testing.T) {
	piece := strings.Repeat("x", 1<<20)
	chunk := fmt.Sprintf("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", piece)
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(gone)
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			if _, err := w.Write([]byte(chunk)); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	cfg := llmtest.Config(llm.ProviderOpenAI, srv.URL+"/v1/")
	// 32 MiB through the race detector on a busy machine takes more than the
	// suite's minute: the timeout here only catches a hang.
	cfg.RequestTimeout = 10 * time.Minute
	p, err := openai.New(cfg, httpx.WithHTTPClient(srv.Client()), httpx.WithAPIKey("sk-test"))
	if err != nil {
		t.Fatal(err)
	}
	received := 0
	_, err = llm.Run(context.Background(), p, llmtest.SuiteRequest(), func(d llm.Delta) { received += len(d.Text) })
	var pe *llm.ProviderError
	if !errors.Is(err, llm.ErrAnswerTooLarge) || !errors.As(err, &pe) || pe.Provider != "openai" || !strings.Contains(err.Error(), "max_tokens") {
		t.Fatalf("err = %v", err)
	}
	if received > llm.MaxAnswerBytes {
		t.Fatalf("%d bytes of deltas reached the caller, over the bound of %d", received, llm.MaxAnswerBytes)
	}
	<-gone // the server saw the client go away
}
