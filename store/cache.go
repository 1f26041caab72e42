package store

import (
	"container/list"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// entry is a session as Apply works on it: its folded state, and a shadow of
// what its rows hold, so that a batch writes only what changed.
//
// The shadows are shallow copies of the state's slices. projection.Apply
// mutates the state's elements and backing arrays in place, but it replaces,
// never mutates, what those elements point to (strings, tool-call slices,
// request references, responses), so comparing an element with its shadow is
// a handful of pointer and length comparisons.
type entry struct {
	id string
	st projection.State

	rejected int  // events of this session consumed but not folded
	tailed   bool // the table tail may hold rows of the session (writeSnapshot prunes them)

	msgs   []llm.Message
	steps  []projection.Step
	calls  []projection.ToolCallRecord
	arts   int
	checks int
	labels map[string]string

	// The lowest index that the events of the current batch may have changed:
	// below it, the state's slices equal their shadows (see bounds.go).
	msgFrom, stepFrom, callFrom int
	dirty                       bool // the row needs writing
	// rowCodec keeps the JSON of the session row's configuration and labels
	// with the values it encodes (writeSession).
	rowCodec struct {
		valid      bool
		cfg        event.Config
		cfgJSON    string
		labels     map[string]string
		labelsJSON string
		// The limits in force (budget_limits) are encoded again only when
		// one of their three sources changed.
		budget     budgetSources
		budgetJSON string
		// The definitions (append-only) are encoded again when their
		// number changed.
		defs     int
		defsJSON string
	}

	elem *list.Element
}

// newEntry wraps a state loaded from the rows: its shadows are the state itself.
func newEntry(id string, st projection.State) *entry {
	e := &entry{id: id, st: st}
	e.msgs = append([]llm.Message(nil), st.Messages...)
	e.steps = append([]projection.Step(nil), st.Steps...)
	e.calls = append([]projection.ToolCallRecord(nil), st.ToolCalls...)
	e.arts, e.checks = len(st.Artifacts), len(st.Checkpoints)
	e.labels = cloneLabels(st.Labels)
	e.resetBounds()
	return e
}

// resetBounds marks everything as written.
func (e *entry) resetBounds() {
	e.msgFrom, e.stepFrom, e.callFrom = len(e.st.Messages), len(e.st.Steps), len(e.st.ToolCalls)
	e.dirty = false
}

func cloneLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// lru is a bounded map of entries, least recently used out first. It holds
// only states that match committed rows: Apply drops the entries of a batch
// that did not commit.
type lru struct {
	max   int
	order *list.List // front = most recent; values are *entry
	byID  map[string]*entry
}

func newLRU(max int) *lru {
	return &lru{max: max, order: list.New(), byID: make(map[string]*entry)}
}

func (c *lru) get(id string) *entry {
	e := c.byID[id]
	if e != nil {
		c.order.MoveToFront(e.elem)
	}
	return e
}

// put adds or refreshes e, evicting the least recently used beyond max.
func (c *lru) put(e *entry) {
	if old := c.byID[e.id]; old != nil {
		if old == e {
			c.order.MoveToFront(e.elem)
			return
		}
		c.remove(e.id)
	}
	e.elem = c.order.PushFront(e)
	c.byID[e.id] = e
	for c.order.Len() > c.max {
		c.remove(c.order.Back().Value.(*entry).id)
	}
}

func (c *lru) remove(id string) {
	if e := c.byID[id]; e != nil {
		c.order.Remove(e.elem)
		e.elem = nil
		delete(c.byID, id)
	}
}
