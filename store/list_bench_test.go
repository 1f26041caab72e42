package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/tah-dev/tah/event"
)

// BenchmarkListByLabel is a page of a listing by a label among 10,000
// sessions: a rare label (10 sessions have it), a label every session has,
// and a label nobody has.
func BenchmarkListByLabel(b *testing.B) {
	const n = 10000
	s := openTest(b, Options{})
	var logs [][]event.Event
	for i := range n {
		labels := map[string]string{"env": "prod", "team": fmt.Sprintf("t%d", i%1000)}
		logs = append(logs, newSession(b, fmt.Sprintf("s_%05d", i), event.Config{}, labels).userTurn("hello").events)
	}
	apply(b, s, merge(logs...), 4096)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"rare", map[string]string{"team": "t7"}},
		{"common", map[string]string{"env": "prod"}},
		{"none", map[string]string{"team": "nobody"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListSessions(ctx, ListOptions{Labels: c.labels}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
