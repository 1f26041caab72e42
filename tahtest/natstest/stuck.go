package natstest

import (
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Stuck describes the goroutines of this process that have waited at least
// minutes (the runtime counts whole minutes: 1 or more) for a lock or to send
// on a channel (not in a select, a read or a sleep, where a server's loops
// idle) in the NATS server's or client's code, grouped by stack, the most numerous first, at most
// limit bytes: what a cluster that stopped answering was waiting on. It is
// "" when there are none. The tests add it to the failure of a cluster that
// did not answer for minutes (a JetStream API request unanswered for three,
// under a loaded CI run), which a log alone never explained.
func Stuck(minutes, limit int) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	type group struct {
		stack string
		state string
		count int
	}
	groups := map[string]*group{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, stack, ok := strings.Cut(g, "\n")
		if !ok {
			continue
		}
		m := waitedRE.FindStringSubmatch(header)
		if m == nil {
			continue
		}
		if waited, _ := strconv.Atoi(m[2]); waited < minutes || !blocked(m[1]) || !strings.Contains(stack, "github.com/nats-io/") {
			continue
		}
		key := normalizeStack(stack)
		if groups[key] == nil {
			groups[key] = &group{stack: key, state: m[1]}
		}
		groups[key].count++
	}
	if len(groups) == 0 {
		return ""
	}
	sorted := slices.SortedFunc(maps.Values(groups), func(a, b *group) int { return b.count - a.count })
	var out strings.Builder
	for _, g := range sorted {
		entry := fmt.Sprintf("%d goroutine(s) [%s, %d+ minutes]:\n%s\n", g.count, g.state, minutes, g.stack)
		if out.Len()+len(entry) > limit {
			fmt.Fprintf(&out, "(more left out)\n")
			break
		}
		out.WriteString(entry)
	}
	return out.String()
}

// waitedRE matches a goroutine's header that says how long it has waited:
// "goroutine 7 [semacquire, 3 minutes]:".
var waitedRE = regexp.MustCompile(`^goroutine \d+ \[([^,\]]+)(?:, [^\]]*?)?, (\d+) minutes?(?:, [^\]]*)?\]:$`)

// blocked reports whether a goroutine's wait reason is a lock's or a
// channel send's, the waits of a deadlock.
func blocked(reason string) bool {
	return strings.HasPrefix(reason, "sync.") || strings.HasPrefix(reason, "semacquire") || strings.HasPrefix(reason, "chan send")
}

// normalizeStack keeps a stack's functions and files, without the argument
// values and offsets that differ between goroutines of the same stack.
func normalizeStack(stack string) string {
	var lines []string
	for _, l := range strings.Split(stack, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.LastIndex(l, "("); i > 0 && !strings.HasPrefix(l, "/") {
			l = l[:i]
		}
		if i := strings.Index(l, " +0x"); i > 0 {
			l = l[:i]
		}
		if l != "" {
			lines = append(lines, "  "+l)
		}
	}
	return strings.Join(lines, "\n")
}

// StuckNote is Stuck(1, 16 KB) as the end of a failure's message, or "":
// what a harness adds to the failure of a cluster that did not answer for
// minutes.
func StuckNote() string {
	if s := Stuck(1, 16<<10); s != "" {
		return "\nwaiting for a minute or more in NATS code, by stack:\n" + s
	}
	return ""
}
