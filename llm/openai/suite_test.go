package openai_test

import (
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/openai"
)

func newProvider(t *testing.T, url string, opts ...httpx.Option) llm.Provider {
	t.Helper()
	p, err := openai.New(llmtest.Config(llm.ProviderOpenAI, url), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSuite(t *testing.T) {
	llmtest.Run(t, llmtest.HTTPHarness(llmtest.OpenAI{}, newProvider))
}
