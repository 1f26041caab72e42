package llm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"openai", func(c *Config) { c.Provider, c.Model = ProviderOpenAI, "gpt-4o-mini" }, ""},
		{"ollama", func(c *Config) {
			c.Provider, c.Model, c.BaseURL = ProviderOpenAI, "llama3.2", "http://localhost:11434/v1"
		}, ""},
		{"anthropic", func(c *Config) { c.Provider, c.Model = ProviderAnthropic, "claude-sonnet-4-5" }, ""},
		{"no retries, no timeout", func(c *Config) { c.MaxRetries, c.RequestTimeout = 0, 0 }, ""},
		{"no provider", func(c *Config) { c.Provider = "" }, "llm.provider: required"},
		{"unknown provider", func(c *Config) { c.Provider = "gemini" }, `llm.provider: "gemini" is not one of`},
		{"no model", func(c *Config) { c.Provider = ProviderAnthropic }, `llm.model: required for provider "anthropic"`},
		{"script for openai", func(c *Config) { c.Provider, c.Model, c.MockScript = ProviderOpenAI, "m", "s.json" }, "llm.mock_script"},
		{"base url scheme", func(c *Config) { c.BaseURL = "localhost:11434" }, "llm.base_url"},
		{"base url credentials", func(c *Config) { c.BaseURL = "https://user:pw@example.com" }, "llm.base_url: must not carry credentials"},
		{"key in the env name", func(c *Config) { c.APIKeyEnv = "sk-proj-abc123" }, "llm.api_key_env"},
		{"negative timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "llm.request_timeout"},
		{"negative retries", func(c *Config) { c.MaxRetries = -1 }, "llm.max_retries"},
		{"backoff order", func(c *Config) { c.BackoffBase, c.BackoffMax = time.Minute, time.Second }, "llm.backoff_max"},
		{"negative max tokens", func(c *Config) { c.MaxTokens = -1 }, "llm.max_tokens"},
		{"negative pace", func(c *Config) { c.MockPace = -1 }, "llm.mock_pace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrConfig with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "abc123") {
				t.Errorf("the error repeats a value that may be a key: %v", err)
			}
		})
	}
}

func TestConfigJSON(t *testing.T) {
	c := DefaultConfig()
	c.Provider, c.Model, c.BaseURL = ProviderOpenAI, "llama3.2", "http://localhost:11434/v1"
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
