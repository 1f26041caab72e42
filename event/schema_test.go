package event

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite docs/schema from the payload types")

const schemaDir = "../docs/schema"

// generateSchemas derives the JSON Schema of the envelope and of every payload
// from the Go types, with their doc comments as descriptions.
func generateSchemas(t *testing.T) map[string][]byte {
	t.Helper()
	r := &jsonschema.Reflector{
		// Fields without omitempty are required, as the Go decoder's zero values
		// would otherwise hide a missing field from a client in another language.
		RequiredFromJSONSchemaTags: false,
		AllowAdditionalProperties:  true, // newer writers may add fields
		Anonymous:                  true,
	}
	// The comment map is keyed by import path joined with the walked directory:
	// walk this package as itself, and llm as a sibling of it.
	for _, dir := range []string{"./", "../llm"} {
		if err := r.AddGoComments("github.com/tah-dev/tah/event", dir); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string][]byte{}
	put := func(name, title string, v any) {
		s := r.Reflect(v)
		s.ID = jsonschema.ID("https://github.com/tah-dev/tah/docs/schema/" + name)
		s.Title = title
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = append(b, '\n')
	}
	put("envelope.json", "TAH event envelope (the body of a message in stream TAH_EVT)", &Event{})
	for _, typ := range Types() {
		put(string(typ)+".json", fmt.Sprintf("Payload of %s events (the envelope's data)", typ), Payload(typ))
	}
	return out
}

// TestSchemasUpToDate keeps docs/schema in step with the payload types
// (go test ./event -run TestSchemasUpToDate -update, or make schema, rewrites them).
func TestSchemasUpToDate(t *testing.T) {
	want := generateSchemas(t)
	if *update {
		if err := os.MkdirAll(schemaDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
		for _, f := range old {
			os.Remove(f)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(schemaDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(wantNames)
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("docs/schema holds %v, want %v: run make schema", names, wantNames)
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(schemaDir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("docs/schema/%s is out of date with the Go types: run make schema", name)
		}
	}
	if !strings.Contains(string(want["turn.started.json"]), `"turn"`) {
		t.Fatal("schema generation lost the fields")
	}
}
