package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

var update = flag.Bool("update", false, "rewrite docs/schema from the Go types")

// The schema directories: events at the top, the other payloads in messages/.
const (
	eventSchemaDir   = "../docs/schema"
	messageSchemaDir = "../docs/schema/messages"
)

// generate derives the JSON Schema of every payload of the contract from the
// Go types, with their doc comments as descriptions: dir -> file -> body.
func generate(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	r := &jsonschema.Reflector{
		// Fields without omitempty are required, as the Go decoder's zero values
		// would otherwise hide a missing field from a client in another language.
		RequiredFromJSONSchemaTags: false,
		AllowAdditionalProperties:  true, // newer writers may add fields
		Anonymous:                  true,
	}
	// The comment map is keyed by import path joined with the walked
	// directory: walk this package as itself, and the others as its siblings.
	for _, dir := range []string{"./", "../event", "../llm", "../pricing", "../projection"} {
		if err := r.AddGoComments("github.com/tah-dev/tah/wire", dir); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]map[string][]byte{eventSchemaDir: {}, messageSchemaDir: {}}
	put := func(dir, name, title string, v any) {
		s := r.Reflect(v)
		rel := strings.TrimPrefix(dir, "../")
		s.ID = jsonschema.ID("https://github.com/tah-dev/tah/" + rel + "/" + name)
		s.Title = title
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out[dir][name] = append(b, '\n')
	}
	put(eventSchemaDir, "record.json", "TAH log record (the body of a message in a shard of the event log, TAH_EVT_<k>: log schema version 2)", &event.Record{})
	put(eventSchemaDir, "envelope.json", "TAH event (an event as tah.api.events returns it; also the body of a message in a log of schema version 1)", &event.Event{})
	for _, typ := range event.Types() {
		put(eventSchemaDir, string(typ)+".json", fmt.Sprintf("Payload of %s events (the envelope's data)", typ), event.Payload(typ))
	}
	for _, s := range wire.Schemas() {
		put(messageSchemaDir, s.File, s.Title, s.Value)
	}
	return out
}

// TestSchemasUpToDate keeps docs/schema in step with the Go types (make
// schema, which is go test ./wire -run TestSchemasUpToDate -update, rewrites
// them).
func TestSchemasUpToDate(t *testing.T) {
	all := generate(t)
	for dir, want := range all {
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			for _, f := range old {
				os.Remove(f)
			}
			for name, b := range want {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		var names []string
		for _, f := range files {
			names = append(names, filepath.Base(f))
		}
		wantNames := slices.Sorted(func(yield func(string) bool) {
			for n := range want {
				if !yield(n) {
					return
				}
			}
		})
		if !reflect.DeepEqual(names, wantNames) {
			t.Fatalf("%s holds %v, want %v: run make schema", dir, names, wantNames)
		}
		for name, b := range want {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s/%s is out of date with the Go types: run make schema", dir, name)
			}
		}
	}
	if !strings.Contains(string(all[eventSchemaDir]["turn.started.json"]), `"turn"`) ||
		!strings.Contains(string(all[messageSchemaDir]["outcome.json"]), `"input_id"`) {
		t.Fatal("schema generation lost the fields")
	}
}
