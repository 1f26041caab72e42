package config

import (
	"errors"
	"strings"
	"testing"
)

// TestReadModelCache: the read model's cache is a setting of its own (its
// variable, its key), 0 by default (the store's default), and a negative
// one is refused naming it.
func TestReadModelCache(t *testing.T) {
	c := Default()
	if c.ReadModelCache != 0 {
		t.Fatalf("default read_model_cache %d, want 0 (the store's default)", c.ReadModelCache)
	}
	env := map[string]string{"TAH_READ_MODEL_CACHE": "5000"}
	if err := c.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.ReadModelCache != 5000 {
		t.Fatalf("read_model_cache %d from TAH_READ_MODEL_CACHE=5000", c.ReadModelCache)
	}
	c.ReadModelCache = -1
	err := c.Validate()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "read_model_cache") {
		t.Fatalf("a negative read_model_cache: %v", err)
	}
}
