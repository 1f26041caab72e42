package tools

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tah-dev/tah/llm"
)

// Catalog is a set of tools an executor can call: a Registry of local tools, the
// tools discovered on NATS (tools/remote), or several merged with Merge.
type Catalog interface {
	// Tool returns the tool named name.
	Tool(name string) (Tool, bool)
	// Schemas describes every tool to the model, sorted by name.
	Schemas() []llm.ToolSchema
}

// Registry holds local tools by name. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

var _ Catalog = (*Registry)(nil)

// NewRegistry returns a registry holding ts. See Add for the errors.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{tools: make(map[string]Tool)}
	if err := r.Add(ts...); err != nil {
		return nil, err
	}
	return r, nil
}

// MustRegistry is NewRegistry for tools known to be right, such as in tests.
func MustRegistry(ts ...Tool) *Registry {
	r, err := NewRegistry(ts...)
	if err != nil {
		panic(err)
	}
	return r
}

// Add registers ts, all or none. It returns an error wrapping ErrInvalidName,
// ErrDuplicateTool or ErrInvalidSchema (the schema is compiled here, once).
func (r *Registry) Add(ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		name := t.Name()
		if err := ValidName(name); err != nil {
			return err
		}
		if _, ok := r.tools[name]; ok || seen[name] {
			return fmt.Errorf("tool %q: %w", name, ErrDuplicateTool)
		}
		seen[name] = true
		if _, err := CompileSchema(SchemaOf(t)); err != nil {
			return fmt.Errorf("tool %q: %w", name, err)
		}
	}
	for _, t := range ts {
		r.tools[t.Name()] = t
	}
	return nil
}

// Remove unregisters the tool named name and reports whether there was one.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Tool returns the tool named name.
func (r *Registry) Tool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Schemas describes every tool, sorted by name.
func (r *Registry) Schemas() []llm.ToolSchema {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]llm.ToolSchema, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, ToolSchema(t))
	}
	sortSchemas(out)
	return out
}

// ToolSchema describes t to the model.
func ToolSchema(t Tool) llm.ToolSchema {
	return llm.ToolSchema{Name: t.Name(), Description: t.Description(), InputSchema: SchemaOf(t)}
}

func sortSchemas(s []llm.ToolSchema) {
	slices.SortFunc(s, func(a, b llm.ToolSchema) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// Merge returns a catalog of the tools of cats. When several hold a tool of the
// same name, the first wins: put local tools first, so that a remote service
// cannot shadow them.
func Merge(cats ...Catalog) Catalog { return merged(cats) }

type merged []Catalog

func (m merged) Tool(name string) (Tool, bool) {
	for _, c := range m {
		if t, ok := c.Tool(name); ok {
			return t, true
		}
	}
	return nil, false
}

func (m merged) Schemas() []llm.ToolSchema {
	var out []llm.ToolSchema
	seen := make(map[string]bool)
	for _, c := range m {
		for _, s := range c.Schemas() {
			if !seen[s.Name] {
				seen[s.Name] = true
				out = append(out, s)
			}
		}
	}
	sortSchemas(out)
	return out
}
