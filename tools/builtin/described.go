package builtin

import (
	"encoding/json"
	"sync"
)

// What a built-in tool tells the model (its description and schema) depends
// only on its name and its limits, and the catalog asks for it at every step
// of every session: built afresh each time (maps, fmt, json.Marshal) it was
// 4% of a node's CPU under load (row 9 of make bench, perf). So each is made
// once per tool and limits, and shared.
type describedKey struct {
	tool, part string
	limits     Limits // with their defaults
}

// described holds what memo built (a string or a json.RawMessage, never
// modified once stored), at most maxDescribed of them: past that (limits
// made afresh per tool value, say) memo keeps nothing more.
var described struct {
	sync.Mutex
	m map[describedKey]any
}

const maxDescribed = 256

// memo returns what build returns for key, made once while described has room.
func memo[T string | json.RawMessage](key describedKey, build func() T) T {
	described.Lock()
	v, ok := described.m[key]
	described.Unlock()
	if ok {
		return v.(T)
	}
	made := build()
	described.Lock()
	defer described.Unlock()
	if described.m == nil {
		described.m = make(map[describedKey]any)
	}
	if len(described.m) < maxDescribed {
		described.m[key] = made
	}
	return made
}
