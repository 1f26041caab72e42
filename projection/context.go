package projection

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// OmittedOutput is the marker that replaces a tool output left out of a request.
func OmittedOutput(chars int) string {
	return fmt.Sprintf("[tool output omitted … %d chars]", chars)
}

var (
	omittedRE = regexp.MustCompile(`^\[tool output omitted … \d+ chars\]$`)
	droppedRE = regexp.MustCompile(`\n*\[(\d+) earlier turns? omitted to fit the context budget\]$`)
)

func isOmitted(content string) bool { return omittedRE.MatchString(content) }

// droppedNote is appended to the system message when whole turns were dropped.
func droppedNote(turns int) string {
	if turns == 1 {
		return "[1 earlier turn omitted to fit the context budget]"
	}
	return fmt.Sprintf("[%d earlier turns omitted to fit the context budget]", turns)
}

// ProjectContext returns the copy of msgs to send to the model within budget
// characters (specification v0.22), and a report of what it cut. The full history
// is not changed: msgs is never mutated. budget <= 0 means no budget.
//
// When msgs is over budget, in order:
//
//  1. tool outputs of older turns are replaced by OmittedOutput, oldest first;
//  2. whole turns are dropped, oldest first, and the end of the system message
//     notes how many;
//  3. tool outputs of the current turn that the model has already seen are
//     replaced, oldest first. The newest batch of tool results and the current
//     turn's messages are always kept.
//
// Each rule stops as soon as the copy fits. Turns are dropped whole, so a tool call
// is never separated from its result. When even the part that is always kept does
// not fit, the report says OverBudget and the smallest copy is returned.
func ProjectContext(msgs []llm.Message, budget int) ([]llm.Message, event.TrimReport) {
	out, report, _ := projectContext(msgs, Elided{}, budget)
	return out, report
}

// projectContext is ProjectContext of a history that msgs holds but for the
// whole turns gap describes, elided right after its preamble. ok is false
// when the result depends on what the gap holds: only a gap that the rules
// would drop whole (its outputs omitted by rule 1, its turns dropped by rule
// 2) is known well enough. Then the copy and the report are those of the
// whole history, as the rules run on it in the same order.
func projectContext(msgs []llm.Message, gap Elided, budget int) (out []llm.Message, report event.TrimReport, ok bool) {
	return projectHistory(msgs, llm.TotalChars(msgs), false, gap, budget)
}

// projectHistory is projectContext of msgs, whose size (llm.TotalChars) is
// chars. frozen says that nothing will ever write msgs' elements again (a
// State's history: see State.prepare): then a history that is sent whole is
// returned as it is, capped so that an append to it cannot write there
// either, instead of copied; each step of a long turn copied its whole
// history for nothing.
func projectHistory(msgs []llm.Message, chars int, frozen bool, gap Elided, budget int) (out []llm.Message, report event.TrimReport, ok bool) {
	total := chars + gap.Chars
	report = event.TrimReport{Budget: budget, BeforeChars: total, AfterChars: total}
	elided := gap.Messages > 0
	if elided && (budget <= 0 || total-gap.Saved <= budget) {
		return nil, report, false // what is sent keeps some of the gap
	}
	if budget <= 0 || total <= budget {
		if frozen {
			return msgs[:len(msgs):len(msgs)], report, true
		}
		return slices.Clone(msgs), report, true
	}
	// A shallow copy: the rules replace a message's content, never what it
	// refers to, so the copy may share tool calls with msgs (and no more
	// than an O(n) move each step, where a deep copy was most of a step's
	// CPU in a long turn).
	out = slices.Clone(msgs)
	pre := preambleEnd(out)
	turns := Turns(out)
	if len(turns) == 0 {
		report.OverBudget = true
		return out, report, !elided
	}
	current := turns[len(turns)-1]

	// Rule 1: older turns' tool outputs, oldest first (the gap's first).
	total -= gap.Saved
	report.OutputsOmitted += gap.Omittable
	for i := pre; i < current.Start && total > budget; i++ {
		if saved, ok := omit(&out[i]); ok {
			total -= saved
			report.OutputsOmitted++
		}
	}

	// Rule 2: drop whole older turns, oldest first, noting how many in the system
	// message. The note's own size counts (each drop adds the note's growth
	// since none were dropped, as it always did: rebuilt requests must match
	// the ones sent). The gap's turns go first: while what is left after them
	// is over budget, each is dropped (notes only grow with the count), so
	// they all go when that holds, and the loop goes on from there.
	if elided && total-(gap.Chars-gap.Saved) <= budget {
		return nil, report, false
	}
	if total > budget && len(turns)+gap.Turns > 1 {
		already := droppedSoFar(out, pre)
		baseSys := systemContent(out, pre)
		size := total - (gap.Chars - gap.Saved)
		for i := 1; i <= gap.Turns; i++ {
			size += noteDelta(baseSys, already, already+i)
		}
		drop := 0
		for drop < len(turns)-1 && size > budget {
			t := turns[drop]
			size -= llm.TotalChars(out[t.Start:t.End])
			drop++
			size += noteDelta(baseSys, already, already+gap.Turns+drop)
		}
		if drop+gap.Turns > 0 {
			out = dropTurns(out, pre, turns[drop].Start, already+gap.Turns+drop)
			report.TurnsDropped = gap.Turns + drop
			total = llm.TotalChars(out)
			pre = preambleEnd(out)
		}
	}

	// Rule 3: outputs of the current turn the model has already seen: those
	// followed by a later assistant message. The newest batch is not.
	if total > budget {
		lastAssistant := -1
		for i := len(out) - 1; i > pre; i-- {
			if out[i].Role == llm.RoleAssistant {
				lastAssistant = i
				break
			}
		}
		for i := pre; i < lastAssistant && total > budget; i++ {
			if saved, ok := omit(&out[i]); ok {
				total -= saved
				report.CurrentOutputsOmitted++
			}
		}
	}
	report.AfterChars = total
	report.OverBudget = total > budget
	return out, report, true
}

// omit replaces a tool message's output by the marker when that makes it smaller,
// and returns how many characters it saved.
func omit(m *llm.Message) (int, bool) {
	if m.Role != llm.RoleTool || isOmitted(m.Content) {
		return 0, false
	}
	n := m.Chars()
	marker := OmittedOutput(n)
	saved := n - len([]rune(marker))
	if saved <= 0 {
		return 0, false
	}
	m.Content = marker
	return saved, true
}

// systemContent is the content of the preamble's leading system message, without
// any note of dropped turns; "" when there is none.
func systemContent(msgs []llm.Message, pre int) string {
	if pre > 0 && msgs[0].Role == llm.RoleSystem {
		return droppedRE.ReplaceAllString(msgs[0].Content, "")
	}
	return ""
}

// droppedSoFar reads the count of an earlier note of dropped turns, so that
// projecting a projected copy again counts all of them.
func droppedSoFar(msgs []llm.Message, pre int) int {
	if pre == 0 || msgs[0].Role != llm.RoleSystem {
		return 0
	}
	m := droppedRE.FindStringSubmatch(msgs[0].Content)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// withNote is a system content with the note of dropped turns at its end.
func withNote(base string, dropped int) string {
	if dropped == 0 {
		return base
	}
	if base == "" {
		return droppedNote(dropped)
	}
	return base + "\n\n" + droppedNote(dropped)
}

// noteDelta is how many characters the system message grows when the note goes
// from `from` to `to` dropped turns (the note may create the system message).
func noteDelta(base string, from, to int) int {
	return len([]rune(withNote(base, to))) - len([]rune(withNote(base, from)))
}

// dropTurns returns msgs without messages[pre:keepFrom] and with the note of
// dropped turns at the end of the system message (a system message is created
// when there is none).
func dropTurns(msgs []llm.Message, pre, keepFrom, dropped int) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)-(keepFrom-pre)+1)
	if pre > 0 && msgs[0].Role == llm.RoleSystem {
		sys := msgs[0]
		sys.Content = withNote(systemContent(msgs, pre), dropped)
		out = append(out, sys)
		out = append(out, msgs[1:pre]...)
	} else {
		out = append(out, llm.System(withNote("", dropped)))
		out = append(out, msgs[:pre]...)
	}
	return append(out, msgs[keepFrom:]...)
}

// Prepare is what the loop sends for a history: ApplySummary, then ProjectContext.
func Prepare(msgs []llm.Message, budget int) ([]llm.Message, event.TrimReport) {
	return ProjectContext(ApplySummary(msgs), budget)
}
