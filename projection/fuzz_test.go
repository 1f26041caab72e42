package projection

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// byteReader hands out fuzz input a byte at a time, then zeros.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *byteReader) more() bool { return r.i < len(r.b) }

// genHistory turns fuzz input into a well-formed history: an optional system
// message, then turns of user messages, answers, and tool calls each answered by
// a result right after its assistant message.
func genHistory(data []byte) []llm.Message {
	r := &byteReader{b: data}
	var msgs []llm.Message
	if r.next()%2 == 0 {
		msgs = append(msgs, llm.System(strings.Repeat("s", r.next())))
	}
	calls := 0
	for r.more() && len(msgs) < 200 {
		switch op := r.next() % 4; op {
		case 0:
			msgs = append(msgs, llm.User(strings.Repeat("u", r.next()*3)))
		case 1:
			msgs = append(msgs, llm.Assistant(strings.Repeat("a", r.next())))
		default:
			n := 1 + r.next()%3
			var cs []llm.ToolCall
			for k := 0; k < n; k++ {
				calls++
				cs = append(cs, call(fmt.Sprintf("c%d", calls), "t", fmt.Sprintf(`{"n":%d}`, r.next())))
			}
			msgs = append(msgs, llm.Assistant(strings.Repeat("a", r.next()%8), cs...))
			for _, c := range cs {
				msgs = append(msgs, llm.ToolResult(c, strings.Repeat("o", r.next()*r.next()/4), false))
			}
		}
	}
	return msgs
}

// alwaysKept is the smallest copy the rules may produce: the preamble (with the
// note of dropped turns if there were older turns) and the current turn with its
// seen outputs replaced by markers where that is smaller.
func alwaysKept(msgs []llm.Message) int {
	turns := Turns(msgs)
	if len(turns) == 0 {
		return llm.TotalChars(msgs)
	}
	pre := preambleEnd(msgs)
	cur := turns[len(turns)-1]
	kept := llm.CloneMessages(msgs[:pre])
	if len(turns) > 1 {
		kept = dropTurns(append(kept, msgs[cur.Start:]...), pre, pre, len(turns)-1)
	} else {
		kept = append(kept, msgs[cur.Start:]...)
	}
	kept = llm.CloneMessages(kept)
	p := preambleEnd(kept)
	last := -1
	for i := len(kept) - 1; i > p; i-- {
		if kept[i].Role == llm.RoleAssistant {
			last = i
			break
		}
	}
	for i := p; i < last; i++ {
		omit(&kept[i])
	}
	return llm.TotalChars(kept)
}

func FuzzProjectContext(f *testing.F) {
	f.Add([]byte{0, 10, 0, 5, 2, 1, 0, 200, 200, 1, 3}, 100)
	f.Add([]byte{1, 0, 1, 2, 2, 9, 90, 90, 90, 0, 7, 3, 200, 200, 200, 200, 1, 1}, 500)
	f.Add([]byte("a much longer seed with many different bytes to walk the generator"), 50)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		msgs := genHistory(data)
		if budget < 0 {
			budget = -budget
		}
		budget %= 20000
		before := jsonOf(t, msgs)
		out, rep := ProjectContext(msgs, budget)
		if jsonOf(t, msgs) != before {
			t.Fatal("input mutated")
		}
		if err := llm.CheckPairing(out); err != nil {
			t.Fatalf("pairing broken: %v", err)
		}
		if rep.AfterChars != llm.TotalChars(out) || rep.BeforeChars != llm.TotalChars(msgs) {
			t.Fatalf("report %+v does not match: before %d after %d", rep, llm.TotalChars(msgs), llm.TotalChars(out))
		}
		if budget > 0 && alwaysKept(msgs) <= budget && rep.AfterChars > budget {
			t.Fatalf("over budget %d although the kept part (%d) fits: %+v", budget, alwaysKept(msgs), rep)
		}
		if budget > 0 && rep.OverBudget != (rep.AfterChars > budget) {
			t.Fatalf("OverBudget flag wrong: %+v", rep)
		}
		// The current turn is always there, its newest tool results untouched.
		if turns := Turns(msgs); len(turns) > 0 {
			cur := msgs[turns[len(turns)-1].Start:]
			tail := out[len(out)-len(cur):]
			for i := range cur {
				if cur[i].Role != tail[i].Role || cur[i].ToolCallID != tail[i].ToolCallID {
					t.Fatalf("current turn changed at %d", i)
				}
				if cur[i].Role != llm.RoleTool && cur[i].Content != tail[i].Content {
					t.Fatalf("current turn message %d changed", i)
				}
			}
			for i := len(cur) - 1; i >= 0 && cur[i].Role == llm.RoleTool; i-- {
				if cur[i].Content != tail[i].Content {
					t.Fatal("newest tool results were cut")
				}
			}
		}
		again, _ := ProjectContext(out, budget)
		if jsonOf(t, again) != jsonOf(t, out) {
			t.Fatal("projecting the output again changed it")
		}
		// Summaries never break the rules either.
		if len(msgs) > 2 {
			k := int(data[0]) % len(msgs)
			if !insideToolBlock(msgs, k) {
				with := append(append(llm.CloneMessages(msgs[:k]), llm.System(SummaryContent("s"))), msgs[k:]...)
				sent, _ := Prepare(with, budget)
				if err := llm.CheckPairing(sent); err != nil {
					t.Fatalf("summary at %d broke pairing: %v", k, err)
				}
			}
		}
	})
}

// genEvents turns fuzz input into an event sequence: mostly what a loop would
// write, with some events out of place, duplicated, malformed or unknown.
func genEvents(data []byte) []event.Event {
	r := &byteReader{b: data}
	const sid = "fz"
	var evs []event.Event
	seq := uint64(0)
	add := func(typ event.Type, payload any) {
		seq++
		raw, _ := json.Marshal(payload)
		evs = append(evs, event.Event{Seq: seq, Session: sid, Type: typ, Data: raw})
	}
	add(event.SessionCreated, event.SessionCreatedData{Config: event.Config{SystemPrompt: "p", MaxSteps: 20}})
	turn, step, callN, epoch := 0, 0, 0, uint64(0)
	var open []llm.ToolCall
	lastLLM := ""
	for r.more() && len(evs) < 300 {
		switch r.next() % 16 {
		case 0:
			turn++
			add(event.TurnStarted, event.TurnStartedData{Turn: turn, Message: llm.User("u")})
		case 1:
			step++
			lastLLM = fmt.Sprintf("l%d", step)
			add(event.LLMStarted, event.LLMStartedData{StepID: lastLLM})
		case 2:
			var cs []llm.ToolCall
			for k := r.next() % 3; k > 0; k-- {
				callN++
				cs = append(cs, call(fmt.Sprintf("c%d", callN), "t", `{}`))
			}
			open = append(open, cs...)
			add(event.LLMCompleted, event.LLMCompletedData{StepID: lastLLM, Response: llm.Response{Content: "a", ToolCalls: cs, Usage: llm.Usage{InputTokens: 1}}})
		case 3:
			if len(open) > 0 {
				step++
				add(event.ToolStarted, event.ToolStartedData{StepID: fmt.Sprintf("t%d", step), Call: open[r.next()%len(open)]})
			}
		case 4:
			if len(open) > 0 {
				c := open[r.next()%len(open)]
				add(event.ToolFinished, event.ToolFinishedData{StepID: "x", CallID: c.ID, Output: "o", IsError: r.next()%2 == 0})
			}
		case 5:
			add(event.AgentFinished, event.AgentFinishedData{Turn: turn})
		case 6:
			add(event.AgentFailed, event.AgentFailedData{Turn: turn, Code: event.CodeMaxSteps})
		case 7:
			add(event.AgentCancelled, event.AgentCancelledData{Turn: turn})
		case 8:
			add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("s"), At: r.next() - 20})
		case 9:
			epoch += uint64(r.next() % 2)
			add(event.SessionClaimed, event.SessionClaimedData{Epoch: epoch, Config: event.Config{SystemPrompt: strings.Repeat("q", r.next()%3)}})
		case 10:
			add(event.LLMFailed, event.LLMFailedData{StepID: lastLLM, Code: event.CodeProvider})
		case 11:
			add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp", UpToSeq: seq})
		case 12:
			types := event.Types()
			seq++
			evs = append(evs, event.Event{Seq: seq, Session: sid, Type: types[r.next()%len(types)],
				Data: json.RawMessage(data[r.i:min(len(data), r.i+r.next()%16)])})
		case 13:
			if len(evs) > 0 {
				evs = append(evs, evs[r.next()%len(evs)]) // a duplicate delivery
			}
		case 14:
			seq++
			evs = append(evs, event.Event{Seq: seq, Session: sid, Type: "x.unknown", Data: json.RawMessage(`{}`)})
		case 15:
			add(event.ContextCompacted, event.ContextCompactedData{SessionID: sid, Auto: true})
		}
	}
	return evs
}

func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 1, 2, 2, 3, 0, 4, 0, 1, 2, 0, 5})
	f.Add([]byte{0, 1, 2, 1, 3, 0, 7, 8, 30, 4, 0, 0, 0, 1, 2, 0, 5, 9, 1, 12, 3, 4, 13, 2, 14})
	f.Add([]byte("random bytes make random logs"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := genEvents(data)
		var st State
		for _, e := range evs {
			before := jsonOf(t, st)
			if err := Apply(&st, e); err != nil {
				if after := jsonOf(t, st); after != before {
					t.Fatalf("rejected %s changed the state: %v", e.Type, err)
				}
			}
		}
		if err := llm.CheckPairing(Repair(st.Messages)); err != nil {
			t.Fatalf("folded history cannot be repaired into a valid one: %v", err)
		}
		full, _ := Fold(evs)
		cut := 0
		if len(data) > 0 && len(evs) > 0 {
			cut = int(data[len(data)-1]) % (len(evs) + 1)
		}
		head, _ := Fold(evs[:cut])
		snap := head.Clone()
		_ = FoldInto(&snap, evs[cut:])
		if jsonOf(t, snap) != jsonOf(t, full) {
			t.Fatalf("snapshot at %d then tail differs from the full fold", cut)
		}
	})
}
