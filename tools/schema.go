package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// anyObject is the schema of a tool that declares none.
var anyObject = json.RawMessage(`{"type":"object"}`)

// SchemaOf returns t's input schema, or {"type":"object"} when it declares none.
func SchemaOf(t Tool) json.RawMessage {
	s := t.Schema()
	if len(bytes.TrimSpace(s)) == 0 {
		return anyObject
	}
	return s
}

// compiled caches compiled schemas by their text, so that each distinct schema is
// compiled once per process, whichever registry or executor meets it first.
var compiled struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}

// maxCachedSchemas bounds the cache; remote services could otherwise grow it
// without end by changing their schemas.
const maxCachedSchemas = 4096

// CompileSchema compiles a tool's input schema. It wraps ErrInvalidSchema when raw
// is not a JSON Schema, when its top level does not accept objects only, or when
// it refers to other documents ($ref to a URL: tools' schemas must be
// self-contained; nothing is ever fetched).
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = anyObject
	}
	compiled.Lock()
	s, ok := compiled.m[string(raw)] // no copy of raw made for the lookup
	compiled.Unlock()
	if ok {
		return s, nil
	}
	key := string(raw)
	s, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	compiled.Lock()
	if compiled.m == nil || len(compiled.m) >= maxCachedSchemas {
		compiled.m = make(map[string]*jsonschema.Schema)
	}
	compiled.m[key] = s
	compiled.Unlock()
	return s, nil
}

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrInvalidSchema, err)
	}
	if t, ok := top["type"]; ok && t != "object" {
		return nil, fmt.Errorf("%w: top-level type is %v, want \"object\"", ErrInvalidSchema, t)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "tool-input.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return s, nil
}

// noLoader refuses to load any document: schemas are self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %s: tool schemas must be self-contained", url)
}

// validateInput checks input against s, returning an error wrapping
// ErrInvalidInput whose message lists what is wrong, in words for the model.
func validateInput(s *jsonschema.Schema, input json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return fmt.Errorf("%w: the arguments are not valid JSON: %v", ErrInvalidInput, err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w:\n%s", ErrInvalidInput, describeValidation(ve))
		}
		return fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	return nil
}

// describeValidation lists what is wrong, one cause a line, as "- at '/path': what
// is wrong". The first line of the library's message, which names the schema's own
// location, is left out: the model cannot use it.
func describeValidation(ve *jsonschema.ValidationError) string {
	lines := strings.Split(ve.Error(), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[0], "jsonschema validation failed") {
		lines = lines[1:]
	}
	const max = 20
	if len(lines) > max {
		lines = append(lines[:max], fmt.Sprintf("- and %d more", len(lines)-max))
	}
	return strings.Join(lines, "\n")
}
