// Package llmtest holds the behavioural suite that every provider passes (Run),
// and fake provider servers that speak the providers' documented wire formats
// (Server with the OpenAI and Anthropic encoders), for tests here and elsewhere.
//
// A case of the suite is written once, as provider-neutral Answers (text pieces,
// tool calls with their argument pieces, usage, a fault); each provider's test
// turns them into what its backend does: a Server with the provider's Encoder
// writes them as SSE frames or JSON bodies, the mock turns them into a script.
//
//	func TestSuite(t *testing.T) {
//		llmtest.Run(t, llmtest.HTTPHarness(llmtest.OpenAI{}, func(t *testing.T, url string, opts ...httpx.Option) llm.Provider {
//			cfg := llmtest.Config(llm.ProviderOpenAI, url)
//			p, err := openai.New(cfg, opts...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return p
//		}))
//	}
//
// Nothing here waits on a clock: retries are recorded by a Sleeper instead of
// slept, and a hung stream waits for the client to go away.
package llmtest
