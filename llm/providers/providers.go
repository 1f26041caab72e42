package providers

import (
	"fmt"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/anthropic"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/llm/openai"
)

// New validates cfg and returns its provider. Every provider it returns is also
// an llm.Streamer. opts (an HTTP client, a logger, test hooks) apply to the HTTP
// providers; the mock ignores them.
//
// The error wraps llm.ErrConfig when cfg cannot work (an unknown provider, a
// missing model or API key, an unreadable mock script).
func New(cfg llm.Config, opts ...httpx.Option) (llm.Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Provider {
	case llm.ProviderMock:
		var script *mock.Script
		if cfg.MockScript != "" {
			s, err := mock.Load(cfg.MockScript)
			if err != nil {
				return nil, fmt.Errorf("llm.mock_script: %w: %w", err, llm.ErrConfig)
			}
			script = s
		}
		// A node never reads the requests back: keeping them would grow without end.
		mopts := []mock.Option{mock.WithPace(cfg.MockPace), mock.WithoutRecording()}
		if cfg.Model != "" {
			mopts = append(mopts, mock.WithModel(cfg.Model))
		}
		return provider(mock.New(script, mopts...))
	case llm.ProviderOpenAI:
		return provider(openai.New(cfg, opts...))
	case llm.ProviderAnthropic:
		return provider(anthropic.New(cfg, opts...))
	}
	return nil, fmt.Errorf("llm.provider: %q is not one of mock, openai, anthropic: %w", cfg.Provider, llm.ErrConfig)
}

// provider returns p as an llm.Provider, and a nil interface (not a nil pointer
// in an interface) with an error.
func provider[P llm.Streamer](p P, err error) (llm.Provider, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}
