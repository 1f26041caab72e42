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

// described holds what memo built: a string or a json.RawMessage, never
// modified once stored.
var described sync.Map

// maxDescribed bounds described: past it (limits made afresh per tool
// value, say) memo keeps nothing more.
const maxDescribed = 256

var describedCount struct {
	sync.Mutex
	n int
}

// memo returns what build returns for key, made once while described has room.
func memo[T string | json.RawMessage](key describedKey, build func() T) T {
	if v, ok := described.Load(key); ok {
		return v.(T)
	}
	v := build()
	describedCount.Lock()
	defer describedCount.Unlock()
	if describedCount.n < maxDescribed {
		if _, loaded := described.LoadOrStore(key, v); !loaded {
			describedCount.n++
		}
	}
	return v
}
