package anthropic_test

import (
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/anthropic"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
)

func newProvider(t *testing.T, url string, opts ...httpx.Option) llm.Provider {
	t.Helper()
	p, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, url), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSuite(t *testing.T) {
	llmtest.Run(t, llmtest.HTTPHarness(llmtest.Anthropic{}, newProvider))
}
