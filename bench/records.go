package bench

import (
	"slices"

	"github.com/tah-dev/tah/event"
)

// records splits events read back from the log into its records, the durable
// writes TAH made: the runs of events that share a stream sequence, in order.
// An event never appended (Seq 0) is a record of its own.
func records(evs []event.Event) [][]event.Event {
	var out [][]event.Event
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[i].Seq != 0 && evs[j].Seq == evs[i].Seq {
			j++
		}
		out = append(out, evs[i:j])
		i = j
	}
	return out
}

// flatten is the events of recs, in order.
func flatten(recs [][]event.Event) []event.Event {
	var out []event.Event
	for _, r := range recs {
		out = append(out, r...)
	}
	return out
}

// has reports whether evs hold an event of type t.
func has(evs []event.Event, t event.Type) bool {
	return slices.ContainsFunc(evs, func(e event.Event) bool { return e.Type == t })
}

// span is the records [from, to) of a turn.
type span struct{ from, to int }

// stepGroups splits a turn's records into one span per LLM step (the read
// model applies whole records): each from the record that holds the step's
// llm.started (with what was written with it: the previous step's tool
// results, or the turn's start) to the record before the next one's. The
// first span also has what came before, the last the end of the turn. A
// quick step is one record (its answer, its tools' start and end, and the
// next llm.started: runTools): a span that holds an answer already ends
// before a record with another, so that such a step followed by one whose
// tool's start was written alone makes two spans, not one of six events.
func stepGroups(recs [][]event.Event) []span {
	var out []span
	start, hasLLM, answered := 0, false, false
	for i, r := range recs {
		cut := has(r, event.LLMStarted) && hasLLM || has(r, event.LLMCompleted) && answered
		if cut {
			out = append(out, span{start, i})
			start, answered = i, false
		}
		hasLLM = hasLLM || has(r, event.LLMStarted)
		answered = answered || has(r, event.LLMCompleted)
	}
	if start < len(recs) {
		out = append(out, span{start, len(recs)})
	}
	return out
}

// fullToolStep reports whether the events of a step's span are the whole
// work of one LLM+tool step in the middle of a turn: the previous step's
// tool result, the model call and its answer, and the tool's start (or, in
// one record, the answer, the tool's start and result and the next call).
// Their bytes are what one step must make durable. The turn's first and
// last spans are not: they hold its start or its end.
func fullToolStep(evs []event.Event) bool {
	return has(evs, event.ToolFinished) && has(evs, event.LLMStarted) && has(evs, event.LLMCompleted) && has(evs, event.ToolStarted) &&
		!has(evs, event.TurnStarted) && !has(evs, event.AgentFinished)
}

// intervals returns, for each LLM call k, the indexes of the records
// appended after call k began and before call k+1 began: those after the
// record that holds llm.started k, up to and with the one that holds
// llm.started k+1.
func intervals(recs [][]event.Event) [][]int {
	var out [][]int
	k := -1
	for i, r := range recs {
		if k >= 0 {
			out[k] = append(out[k], i)
		}
		if has(r, event.LLMStarted) {
			k++
			out = append(out, nil)
		}
	}
	return out
}
