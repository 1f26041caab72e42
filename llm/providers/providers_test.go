package providers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/anthropic"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/llm/openai"
	"github.com/tah-dev/tah/llm/providers"
)

func TestNew(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"replies": [{"text": "scripted"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := llm.DefaultConfig()
	demo, err := providers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := demo.(*mock.Provider); !ok {
		t.Errorf("the default configuration gives %T, want the mock", demo)
	}
	cfg.MockScript, cfg.MockPace = script, 0
	scripted, err := providers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := scripted.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.User("x")}})
	if err != nil || r.Content != "scripted" {
		t.Errorf("the scripted mock answered %q, %v", r.Content, err)
	}

	for provider, want := range map[string]string{llm.ProviderOpenAI: openai.Name, llm.ProviderAnthropic: anthropic.Name} {
		cfg := llm.DefaultConfig()
		cfg.Provider, cfg.Model = provider, "some-model"
		p, err := providers.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		if _, ok := p.(llm.Streamer); !ok || p.Name() != want {
			t.Errorf("%s: got %T named %q", provider, p, p.Name())
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	bad := []llm.Config{
		{Provider: "gemini"},
		{Provider: llm.ProviderOpenAI},                                       // no model
		{Provider: llm.ProviderOpenAI, Model: "gpt"},                         // no key for api.openai.com
		{Provider: llm.ProviderMock, MockScript: "/nonexistent/script.json"}, // unreadable script
	}
	for _, cfg := range bad {
		p, err := providers.New(cfg)
		if !errors.Is(err, llm.ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", cfg, err)
		}
		if p != nil {
			t.Errorf("%+v: a provider (%T) with the error", cfg, p)
		}
	}
}

func TestNewLocalServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	srv := llmtest.NewServer(t, llmtest.OpenAI{}, llmtest.Answer{Text: []string{"from ollama"}})
	cfg := llm.DefaultConfig()
	cfg.Provider, cfg.Model, cfg.BaseURL = llm.ProviderOpenAI, "llama3.2", srv.URL+"/v1"
	p, err := providers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := llm.Run(context.Background(), p, llm.Request{Messages: []llm.Message{llm.User("hi")}}, func(llm.Delta) {})
	if err != nil || r.Content != "from ollama" {
		t.Fatalf("answer %q, %v", r.Content, err)
	}
}
