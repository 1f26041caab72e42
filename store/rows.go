package store

import (
	"bytes"
	"strings"
	"time"
	"unicode"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// TitleRunes is the longest title (wire.SessionSummary.Title), in runes,
// before an ellipsis.
const TitleRunes = 80

// title is the first user message of msgs, whitespace collapsed, cut at
// TitleRunes.
func title(msgs []llm.Message) string {
	for _, m := range msgs {
		if m.Role != llm.RoleUser {
			continue
		}
		var sb strings.Builder
		n, space := 0, false
		for _, r := range m.Content {
			if unicode.IsSpace(r) {
				space = sb.Len() > 0
				continue
			}
			if n == TitleRunes {
				sb.WriteString("…")
				break
			}
			if space {
				sb.WriteByte(' ')
				n++
				space = false
				if n == TitleRunes {
					sb.WriteString("…")
					break
				}
			}
			sb.WriteRune(r)
			n++
		}
		return sb.String()
	}
	return ""
}

// firstMessageDiff is the first index from from on where a and b differ, or
// the length of the shorter when one is a prefix of the other.
func firstMessageDiff(a, b []llm.Message, from int) int {
	n := min(len(a), len(b))
	for i := from; i < n; i++ {
		if !messageEqual(&a[i], &b[i]) {
			return i
		}
	}
	return n
}

// messageEqual compares two messages. Strings and byte slices that share
// memory compare in constant time, which is the common case against a shadow.
func messageEqual(a, b *llm.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID ||
		a.Name != b.Name || a.IsError != b.IsError || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := &a.ToolCalls[i], &b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || !bytes.Equal(x.Arguments, y.Arguments) {
			return false
		}
	}
	return true
}

// stepEqual compares two steps. Request references, responses and the other pointers
// are replaced, never modified, by projection.Apply, so comparing the pointers
// is enough.
func stepEqual(a, b *projection.Step) bool {
	return a.ID == b.ID && a.Type == b.Type && a.Turn == b.Turn && a.Status == b.Status &&
		a.RequestRef == b.RequestRef && a.Response == b.Response && a.Trim == b.Trim && a.Cost == b.Cost &&
		a.Tool == b.Tool && a.CallID == b.CallID && bytes.Equal(a.Input, b.Input) &&
		a.Output == b.Output && a.Idempotent == b.Idempotent && a.Artifact == b.Artifact && a.Compaction == b.Compaction && a.Child == b.Child &&
		a.Content == b.Content && a.Error == b.Error && a.Code == b.Code &&
		a.StartSeq == b.StartSeq && a.EndSeq == b.EndSeq &&
		a.StartedAt.Equal(b.StartedAt) && a.EndedAt.Equal(b.EndedAt) && a.DurationMS == b.DurationMS
}

func callEqual(a, b *projection.ToolCallRecord) bool {
	return a.CallID == b.CallID && a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments) &&
		a.Turn == b.Turn && a.StepID == b.StepID && a.Status == b.Status && a.IsError == b.IsError &&
		a.Code == b.Code && a.HasResult == b.HasResult
}

// unixNano stores a time; the zero time is 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano reads a time stored by unixNano, in UTC.
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// formatTime keeps an event's time as its JSON has it, so that it round-trips.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	var buf [len(time.RFC3339Nano) + 10]byte // room for a zone of ±hh:mm
	return string(t.AppendFormat(buf[:0], time.RFC3339Nano))
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
