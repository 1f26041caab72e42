package event

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemas compiles docs/schema.
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no schemas in docs/schema: run make schema")
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		abs, _ := filepath.Abs(f)
		s, err := c.Compile(abs)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = s
	}
	return out
}

// validateEvent checks an envelope and its payload against their schemas.
// Unknown types have no payload schema; ok reports whether one was found.
func validateEvent(t *testing.T, sc map[string]*jsonschema.Schema, raw []byte) (known bool, err error) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return false, err
	}
	if err := sc["envelope.json"].Validate(v); err != nil {
		return true, fmt.Errorf("envelope: %w", err)
	}
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return true, err
	}
	s, ok := sc[env.Type+".json"]
	if !ok {
		return false, nil
	}
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(env.Data))
	if err != nil {
		return true, err
	}
	if err := s.Validate(d); err != nil {
		return true, fmt.Errorf("%s payload: %w", env.Type, err)
	}
	return true, nil
}

// TestRecordedEventsValidate: every event of the recorded logs in testdata
// validates against its schema, except in logs recorded to hold bad events on
// purpose (named *unknown* or *invalid*), where an event the schema refuses must
// also be refused by the Go decoder.
func TestRecordedEventsValidate(t *testing.T) {
	sc := schemas(t)
	files, _ := filepath.Glob("../*/testdata/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded logs found")
	}
	for _, f := range files {
		bad := strings.Contains(f, "unknown") || strings.Contains(f, "invalid")
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc2 := bufio.NewScanner(fh)
		sc2.Buffer(make([]byte, 1<<20), 1<<24)
		for line := 1; sc2.Scan(); line++ {
			raw := append([]byte(nil), sc2.Bytes()...)
			known, verr := validateEvent(t, sc, raw)
			if !bad && (!known || verr != nil) {
				t.Errorf("%s:%d: known=%v: %v", f, line, known, verr)
			}
			if bad && verr != nil {
				var e Event
				if json.Unmarshal(raw, &e) == nil {
					if _, derr := e.Decode(); derr == nil {
						t.Errorf("%s:%d: refused by the schema (%v) but decoded by Go", f, line, verr)
					}
				}
			}
		}
		fh.Close()
	}
}

var (
	fenceRE  = regexp.MustCompile("(?s)(<!-- schema: ([a-z.\\-]+) -->\\s*)?```json\\n(.*?)```")
	docGlobs = []string{"../docs/*.md", "../README.md", "../*/doc.go"}
)

// TestDocExamplesValidate: every JSON example in docs/ that is an event envelope
// validates against the envelope and payload schemas, and every example marked
// <!-- schema: NAME --> against docs/schema/NAME.
func TestDocExamplesValidate(t *testing.T) {
	sc := schemas(t)
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
					s, ok := sc[named]
					if !ok {
						t.Errorf("%s: example names schema %q, which does not exist", f, named)
						continue
					}
					v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
					if err != nil {
						t.Errorf("%s: example for %s is not JSON: %v", f, named, err)
						continue
					}
					if err := s.Validate(v); err != nil {
						t.Errorf("%s: example for %s: %v", f, named, err)
					}
					checked++
					continue
				}
				var probe map[string]json.RawMessage
				if json.Unmarshal(body, &probe) != nil || probe["type"] == nil || probe["data"] == nil || probe["session"] == nil {
					continue
				}
				known, err := validateEvent(t, sc, body)
				if !known || err != nil {
					t.Errorf("%s: event example: known=%v: %v\n%s", f, known, err, body)
				}
				checked++
			}
		}
	}
	t.Logf("%d examples checked", checked)
}
