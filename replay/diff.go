package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/tah-dev/tah/llm"
)

// Limits of a report's diffs.
const (
	// excerptRunes is how much of a value a Diff keeps whole; a longer one
	// is cut to excerptBefore runes before where the two part and the rest
	// of excerptRunes after.
	excerptRunes  = 240
	excerptBefore = 60
)

// diffRequests says how the replay's request b differs from the recorded
// request a: its settings, its tools, then its messages (the first that
// differs, and how many differ).
func diffRequests(a, b llm.Request) []Diff {
	var out []Diff
	if a.Model != b.Model {
		out = append(out, Diff{What: "model", Recorded: a.Model, Replayed: b.Model})
	}
	if ja, jb := compactJSON(a.Options), compactJSON(b.Options); ja != jb {
		out = append(out, Diff{What: "options", Recorded: ja, Replayed: jb})
	}
	out = append(out, diffTools(a.Tools, b.Tools)...)
	return append(out, diffMessages(a.Messages, b.Messages)...)
}

// diffTools names the tools offered by one request only, those whose
// description or schema differ, and a change of order.
func diffTools(a, b []llm.ToolSchema) []Diff {
	var out []Diff
	byName := func(ts []llm.ToolSchema, name string) *llm.ToolSchema {
		for i := range ts {
			if ts[i].Name == name {
				return &ts[i]
			}
		}
		return nil
	}
	for _, t := range a {
		u := byName(b, t.Name)
		if u == nil {
			out = append(out, Diff{What: "tool", Name: t.Name, Field: "removed"})
			continue
		}
		if t.Description != u.Description {
			ra, rb := excerpts(t.Description, u.Description)
			out = append(out, Diff{What: "tool", Name: t.Name, Field: "description", Recorded: ra, Replayed: rb})
		}
		if sa, sb := compactRaw(t.InputSchema), compactRaw(u.InputSchema); sa != sb {
			ra, rb := excerpts(sa, sb)
			out = append(out, Diff{What: "tool", Name: t.Name, Field: "input_schema", Recorded: ra, Replayed: rb})
		}
	}
	for _, u := range b {
		if byName(a, u.Name) == nil {
			out = append(out, Diff{What: "tool", Name: u.Name, Field: "added"})
		}
	}
	if len(out) == 0 && !slices.EqualFunc(a, b, func(x, y llm.ToolSchema) bool { return x.Name == y.Name }) {
		out = append(out, Diff{What: "tools", Field: "order", Recorded: names(a), Replayed: names(b)})
	}
	return out
}

// diffMessages describes the first message that differs, and how many do
// (or that one request has more).
func diffMessages(a, b []llm.Message) []Diff {
	var out []Diff
	first, differ := -1, 0
	for i := range min(len(a), len(b)) {
		if d, ok := diffMessage(i, a[i], b[i]); ok {
			if first < 0 {
				first = i
				out = append(out, d)
			}
			differ++
		}
	}
	if len(a) != len(b) {
		if first < 0 {
			// One request has every message of the other, and more.
			i := min(len(a), len(b))
			extra, who := b, "replay"
			if len(a) > len(b) {
				extra, who = a, "recording"
			}
			m := extra[i]
			ra, rb := "", ""
			if who == "recording" {
				ra = excerpt(m.Content)
			} else {
				rb = excerpt(m.Content)
			}
			out = append(out, Diff{What: "message", Index: &i, Role: string(m.Role), Field: "only in the " + who, Recorded: ra, Replayed: rb})
		}
		out = append(out, Diff{What: "messages", Recorded: strconv.Itoa(len(a)), Replayed: strconv.Itoa(len(b))})
	} else if differ > 1 {
		out = append(out, Diff{What: "messages", Field: "differing", Recorded: fmt.Sprintf("%d of %d", differ, len(a)), Replayed: fmt.Sprintf("%d of %d", differ, len(b))})
	}
	return out
}

// diffMessage says how message i differs between the two requests: the
// first part of it that does.
func diffMessage(i int, a, b llm.Message) (Diff, bool) {
	d := Diff{What: "message", Index: &i, Role: string(a.Role)}
	switch {
	case a.Role != b.Role:
		d.Field, d.Recorded, d.Replayed = "role", string(a.Role), string(b.Role)
	case a.Content != b.Content:
		d.Field = "content"
		d.Recorded, d.Replayed = excerpts(a.Content, b.Content)
	case compactJSON(a.ToolCalls) != compactJSON(b.ToolCalls):
		d.Field = "tool_calls"
		d.Recorded, d.Replayed = excerpts(compactJSON(a.ToolCalls), compactJSON(b.ToolCalls))
	case a.ToolCallID != b.ToolCallID:
		d.Field, d.Recorded, d.Replayed = "tool_call_id", a.ToolCallID, b.ToolCallID
	case a.Name != b.Name:
		d.Field, d.Recorded, d.Replayed = "name", a.Name, b.Name
	case a.IsError != b.IsError:
		d.Field, d.Recorded, d.Replayed = "is_error", strconv.FormatBool(a.IsError), strconv.FormatBool(b.IsError)
	case a.Steer != b.Steer:
		d.Field, d.Recorded, d.Replayed = "steer", strconv.FormatBool(a.Steer), strconv.FormatBool(b.Steer)
	default:
		return Diff{}, false
	}
	return d, true
}

// excerpts are a and b cut alike around where they part, when either is
// long.
func excerpts(a, b string) (string, string) {
	ra, rb := []rune(a), []rune(b)
	if len(ra) <= excerptRunes && len(rb) <= excerptRunes {
		return a, b
	}
	at := 0
	for at < len(ra) && at < len(rb) && ra[at] == rb[at] {
		at++
	}
	from := max(0, at-excerptBefore)
	return cut(ra, from), cut(rb, from)
}

// excerpt is s, cut to its beginning when long.
func excerpt(s string) string { return cut([]rune(s), 0) }

// cut is r from index from, excerptRunes long at most, marked "…" where
// cut.
func cut(r []rune, from int) string {
	end := min(len(r), from+excerptRunes)
	from = min(from, end)
	s := string(r[from:end])
	if from > 0 {
		s = "…" + s
	}
	if end < len(r) {
		s += "…"
	}
	return s
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func compactRaw(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func names(ts []llm.ToolSchema) string {
	b, _ := json.Marshal(slices.Collect(func(yield func(string) bool) {
		for _, t := range ts {
			if !yield(t.Name) {
				return
			}
		}
	}))
	return string(b)
}
