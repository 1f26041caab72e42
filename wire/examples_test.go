package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// compile compiles every schema under docs/schema, by its path relative to it
// ("envelope.json", "messages/input.json").
func compile(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, dir := range []string{eventSchemaDir, messageSchemaDir} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no schemas in %s: run make schema", dir)
		}
		for _, f := range files {
			abs, _ := filepath.Abs(f)
			s, err := c.Compile(abs)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rel, _ := filepath.Rel(eventSchemaDir, f)
			out[filepath.ToSlash(rel)] = s
		}
	}
	return out
}

var (
	// fenceRE finds the JSON examples of a document, with the schema an
	// example is marked with (<!-- schema: NAME --> just before it).
	fenceRE  = regexp.MustCompile("(?s)(<!-- schema: ([a-z_./\\-]+) -->\\s*)?```json\\n(.*?)```")
	docGlobs = []string{"../docs/*.md", "../README.md", "../*/doc.go"}
)

// TestDocExamplesValidate: every JSON example of the documents that is a log
// record or an event validates against the record or envelope schema and its
// payloads' schemas, every
// example marked <!-- schema: NAME --> against docs/schema/NAME, and every
// payload of the contract has at least one example in docs/protocol.md.
func TestDocExamplesValidate(t *testing.T) {
	sc := compile(t)
	validate := func(name string, body []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			return err
		}
		return sc[name].Validate(v)
	}
	covered := map[string]bool{}
	checked := 0
	for _, g := range docGlobs {
		files, _ := filepath.Glob(g)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range fenceRE.FindAllSubmatch(b, -1) {
				named, body := string(m[2]), m[3]
				if named != "" {
					if _, ok := sc[named]; !ok {
						t.Errorf("%s: example names schema %q, which does not exist", f, named)
						continue
					}
					if err := validate(named, body); err != nil {
						t.Errorf("%s: example for %s: %v\n%s", f, named, err, body)
					}
					if filepath.Base(f) == "protocol.md" {
						covered[named] = true
					}
					checked++
					continue
				}
				var env struct {
					Session string              `json:"session"`
					Type    string              `json:"type"`
					Data    json.RawMessage     `json:"data"`
					Events  []event.RecordEvent `json:"events"`
				}
				if json.Unmarshal(body, &env) != nil || env.Session == "" {
					continue
				}
				payloads := env.Events
				switch {
				case len(env.Events) > 0:
					if err := validate("record.json", body); err != nil {
						t.Errorf("%s: record example: %v\n%s", f, err, body)
					}
				case env.Type != "" && env.Data != nil:
					if err := validate("envelope.json", body); err != nil {
						t.Errorf("%s: event example: %v\n%s", f, err, body)
					}
					payloads = []event.RecordEvent{{Type: event.Type(env.Type), Data: env.Data}}
				default:
					continue
				}
				for _, p := range payloads {
					if _, ok := sc[string(p.Type)+".json"]; !ok {
						t.Errorf("%s: event example of unknown type %q", f, p.Type)
					} else if err := validate(string(p.Type)+".json", p.Data); err != nil {
						t.Errorf("%s: %s example: %v\n%s", f, p.Type, err, body)
					}
				}
				checked++
			}
		}
	}
	var missing []string
	for _, s := range wire.Schemas() {
		if !covered["messages/"+s.File] {
			missing = append(missing, s.File)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("docs/protocol.md has no example marked <!-- schema: messages/NAME --> for: %v", missing)
	}
	t.Logf("%d examples checked", checked)
}
