package store

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// openTest opens a store in a fresh temporary directory, with the change
// bounds verified against full comparisons, closed at the end of the test.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "data.db"), opts)
}

func openAt(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.verify = true
	t.Cleanup(func() { s.Close() })
	return s
}

// apply applies events in batches of size n and returns the problems reported.
func apply(t testing.TB, s *Store, events []event.Event, n int) []Problem {
	t.Helper()
	var probs []Problem
	for i := 0; i < len(events); i += n {
		res, err := s.Apply(context.Background(), events[i:min(i+n, len(events))])
		if err != nil {
			t.Fatalf("apply batch at %d (size %d): %v", i, n, err)
		}
		probs = append(probs, res.Problems...)
	}
	return probs
}

// sessionLog writes a session's log the way the loop does: sequences from 1 and
// times one second apart (renumber merges logs into one stream).
type sessionLog struct {
	t      testing.TB
	id     string
	seq    uint64
	turn   int
	step   int
	epoch  uint64 // of the last claim: its owner writes with it
	events []event.Event
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func newSession(t testing.TB, id string, cfg event.Config, labels map[string]string) *sessionLog {
	b := &sessionLog{t: t, id: id}
	return b.add(event.SessionCreated, event.SessionCreatedData{Config: cfg, Labels: labels})
}

func (b *sessionLog) add(typ event.Type, data any) *sessionLog {
	b.t.Helper()
	e, err := event.New(b.id, typ, data)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.push(e)
}

// raw appends an event with a payload as given, for events that are wrong.
func (b *sessionLog) raw(typ event.Type, data string) *sessionLog {
	return b.push(event.Event{Session: b.id, Type: typ, Data: json.RawMessage(data)})
}

func (b *sessionLog) push(e event.Event) *sessionLog {
	switch e.Type {
	case event.SessionCreated, event.SessionForked:
	case event.SessionClaimed:
		if d, err := event.DecodeAs[event.SessionClaimedData](e); err == nil {
			b.epoch = d.Epoch
		}
		e.Epoch = b.epoch
	default:
		e.Epoch = b.epoch
	}
	b.seq++
	e.Seq = b.seq
	e.Time = t0.Add(time.Duration(b.seq) * time.Second)
	b.events = append(b.events, e)
	return b
}

func (b *sessionLog) nextStep() string { b.step++; return fmt.Sprintf("st%d", b.step) }

func (b *sessionLog) userTurn(text string) *sessionLog {
	b.turn++
	return b.add(event.TurnStarted, event.TurnStartedData{Turn: b.turn, Message: llm.User(text)})
}

// llm appends llm.started and llm.completed, answering with content and
// calls, at a cost: $0.000045 for a step of an odd number, no price for the
// others.
func (b *sessionLog) llm(content string, calls ...llm.ToolCall) *sessionLog {
	id := b.nextStep()
	cost := &pricing.Cost{USD: 0.000045}
	if b.step%2 == 0 {
		cost = &pricing.Cost{Unpriced: 1}
	}
	b.add(event.LLMStarted, event.LLMStartedData{StepID: id, Turn: b.turn, RequestRef: ref(len(b.events))})
	return b.add(event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{
		Content: content, ToolCalls: calls, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, Cost: cost})
}

// tool appends tool.started and tool.finished for call.
func (b *sessionLog) tool(call llm.ToolCall, output string) *sessionLog {
	id := b.nextStep()
	b.add(event.ToolStarted, event.ToolStartedData{StepID: id, Call: call})
	return b.add(event.ToolFinished, event.ToolFinishedData{StepID: id, CallID: call.ID, Name: call.Name, Output: output})
}

func (b *sessionLog) finish(content string) *sessionLog {
	return b.add(event.AgentFinished, event.AgentFinishedData{Turn: b.turn, Content: content, Steps: 1})
}

// ref is a request reference to history messages (the store never checks
// it against the log).
func ref(history int, tools ...string) event.RequestRef {
	r := event.RequestRef{History: history, Model: "m", Tools: tools, RequestSHA256: fmt.Sprintf("%064x", history)}
	if len(tools) > 0 {
		r.ToolsDigest = strings.Repeat("d", 64)
	}
	return r
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// richLog exercises every event type and every place projection.Apply changes
// the history: claims that replace, remove and add the system prompt, parallel
// calls, a failed LLM step, artifacts and checkpoints, a cancel with a started
// and a never-started call repaired after a manual summary (results inserted
// before the end), an automatic summary inserted before the current user
// message, a maxSteps failure, and events that cannot be folded.
func richLog(t testing.TB, id string) []event.Event {
	sys := event.Config{SystemPrompt: "sys1", MaxSteps: 0}
	b := newSession(t, id, sys, map[string]string{"team": "a", "env": "test"})
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: sys})
	c1, c2 := call("c1", "list_files", `{"path":"."}`), call("c2", "read_file", `{"path":"go.mod"}`)
	b.userTurn("first   question\nspread over lines")
	st := b.nextStep()
	// As a log written before requests were recorded by reference has it.
	b.add(event.LLMStarted, event.LLMStartedData{StepID: st, Turn: b.turn, Request: llm.Request{Messages: []llm.Message{llm.User("q")}}})
	b.add(event.LLMStreaming, event.LLMStreamingData{StepID: st})
	b.add(event.LLMCompleted, event.LLMCompletedData{StepID: st, DurationMS: 42, Response: llm.Response{
		ToolCalls: []llm.ToolCall{c1, c2}, FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: 100, OutputTokens: 7, CacheReadTokens: 3}}})
	s1, s2 := b.nextStep(), b.nextStep()
	b.add(event.ToolStarted, event.ToolStartedData{StepID: s1, Call: c1, Idempotent: true, Runner: "local"})
	b.add(event.ToolStarted, event.ToolStartedData{StepID: s2, Call: c2})
	b.add(event.ToolFinished, event.ToolFinishedData{StepID: s2, CallID: c2.ID, Name: c2.Name, Output: "module x"})
	b.add(event.ToolFinished, event.ToolFinishedData{StepID: s1, CallID: c1.ID, Name: c1.Name, Output: "go.mod\nmain.go",
		Artifact: &event.ArtifactRef{Bucket: "tah_artifacts", Object: "o1", Size: 12, SHA256: "ab"}})
	b.add(event.ArtifactCreated, event.ArtifactCreatedData{ID: "a1", Name: "listing.txt", StepID: s1, CallID: c1.ID,
		ContentType: "text/plain", Ref: event.ArtifactRef{Bucket: "tah_artifacts", Object: "o1", Size: 12}})
	b.add(event.Thinking, event.ThinkingData{StepID: b.nextStep(), Content: "go.mod names the module"})
	tools := []llm.ToolSchema{{Name: "list_files"}, {Name: "read_file", Description: "Reads <a> file."}}
	digest, err := event.ToolsDigest(tools)
	if err != nil {
		t.Fatal(err)
	}
	b.add(event.ToolsOffered, event.ToolsOfferedData{Digest: digest, Tools: tools})
	st = b.nextStep()
	r := ref(6, "list_files", "read_file")
	r.ToolsDigest = digest
	b.add(event.LLMStarted, event.LLMStartedData{StepID: st, Turn: b.turn, RequestRef: r})
	b.add(event.LLMFailed, event.LLMFailedData{StepID: st, Error: "HTTP 500", Code: event.CodeProvider})
	b.llm("the module is x").finish("the module is x")
	b.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp1", UpToSeq: b.seq, Bucket: "tah_ckpt", Key: id, Events: int(b.seq)})

	// A new owner with a new system prompt: message 0 changes in place.
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 2, Node: "n2", Config: event.Config{SystemPrompt: "sys2"}})
	c3, c4 := call("c3", "slow", `{}`), call("c4", "other", `{}`)
	b.userTurn("second")
	b.llm("", c3, c4)
	s3 := b.nextStep()
	b.add(event.ToolStarted, event.ToolStartedData{StepID: s3, Call: c3})
	b.add(event.AgentCancelled, event.AgentCancelledData{Turn: b.turn, Reason: "by the user"})
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: projection.SummaryPrefix + "\n- two turns", At: -1, Turns: 2})
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: id, Turns: 2, Chars: 40})
	for _, c := range []llm.ToolCall{c3, c4} {
		b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: projection.NotExecutedOutput,
			IsError: true, Code: event.CodeNotExecuted})
	}

	// Bad events: an unknown type, a malformed payload, a result for a call
	// nobody made, a streaming mark for no step, a turn that is not after the last.
	b.raw("agent.dreamed", `{"x":1}`)
	b.raw(event.ToolFinished, `{"call_id":5}`)
	b.add(event.ToolFinished, event.ToolFinishedData{CallID: "nobody", Output: "?"})
	b.add(event.LLMStreaming, event.LLMStreamingData{StepID: "nostep"})
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("again")})

	// An automatic compaction that fails, then one inserted before the current
	// user message, then trimming.
	b.userTurn("third")
	b.add(event.ContextCompactFailed, event.ContextCompactFailedData{SessionID: id, Error: "boom", Auto: true,
		CompactionCall: event.CompactionCall{StepID: "cmp1", Usage: llm.Usage{InputTokens: 300, OutputTokens: 2}, Cost: &pricing.Cost{USD: 0.0009}}})
	at := len(mustFold(t, b.events).Messages) - 1
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: projection.SummaryPrefix + "\n- three turns", At: at, Turns: 2, Auto: true})
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: id, Turns: 2, Chars: 40, Auto: true})
	st = b.nextStep()
	trim := &event.TrimReport{Budget: 100, BeforeChars: 300, AfterChars: 90, TurnsDropped: 1}
	b.add(event.ContextTrimmed, event.ContextTrimmedData{StepID: st, Report: *trim})
	b.add(event.LLMStarted, event.LLMStartedData{StepID: st, Turn: b.turn, Trim: trim, RequestRef: ref(12, "list_files")})
	b.add(event.LLMCompleted, event.LLMCompletedData{StepID: st, Response: llm.Response{Content: "third answer"}})
	b.finish("third answer")

	// The prompt removed (message 0 deleted), then added again (inserted).
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 3, Node: "n1", Config: event.Config{MaxSteps: 2}})
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 4, Node: "n1", Config: event.Config{SystemPrompt: "sys4", MaxSteps: 2}})

	// A failing tool and maxSteps.
	c5 := call("c5", "build", `{"target":"all"}`)
	b.userTurn("fourth")
	b.llm("", c5)
	s5 := b.nextStep()
	b.add(event.ToolStarted, event.ToolStartedData{StepID: s5, Call: c5, Idempotent: true})
	b.add(event.ToolFinished, event.ToolFinishedData{StepID: s5, CallID: c5.ID, Name: c5.Name, Output: "exit 2", IsError: true, Code: event.CodeToolError, DurationMS: 1500})
	b.llm("still failing")
	b.add(event.AgentFailed, event.AgentFailedData{Turn: b.turn, Error: "reached maxSteps (2)", Code: event.CodeMaxSteps, Steps: 2})
	b.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp2", UpToSeq: b.seq, Events: int(b.seq)})
	return b.events
}

// mustFold is the read model's fold of evs: what Apply folds, and the fault
// where ApplyLog stops.
func mustFold(t testing.TB, evs []event.Event) projection.State {
	t.Helper()
	st, _ := projection.Fold(evs)
	var strict projection.State
	st.Fault = projection.FoldLog(&strict, evs)
	return st
}

// readLog reads a recorded log of projection/testdata.
func readLog(t testing.TB, file string) []event.Event {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e event.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// recordedLogs are projection's recorded logs, by name.
func recordedLogs(t testing.TB) map[string][]event.Event {
	t.Helper()
	files, err := filepath.Glob("../projection/testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded logs: %v", err)
	}
	logs := make(map[string][]event.Event)
	for _, f := range files {
		logs[strings.TrimSuffix(filepath.Base(f), ".jsonl")] = readLog(t, f)
	}
	return logs
}

// merge interleaves logs round-robin into one stream, renumbering the
// sequences as the stream would.
func merge(logs ...[]event.Event) []event.Event {
	var out []event.Event
	for i := 0; ; i++ {
		added := false
		for _, l := range logs {
			if i < len(l) {
				e := l[i]
				e.Seq = uint64(len(out) + 1)
				out = append(out, e)
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// copyLog is evs with every valid session id suffixed and every sequence
// shifted by base, so that several copies of a log fit in one stream.
func copyLog(evs []event.Event, suffix string, base uint64) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		if event.ValidSessionID(e.Session) == nil {
			e.Session += "_" + suffix
		}
		e.Seq += base
		out[i] = e
	}
	return out
}

// bySession groups the events of valid session ids, in order.
func bySession(evs []event.Event) map[string][]event.Event {
	m := make(map[string][]event.Event)
	for _, e := range evs {
		if e.Seq != 0 && event.ValidSessionID(e.Session) == nil {
			m[e.Session] = append(m[e.Session], e)
		}
	}
	return m
}

// checkEquivalent asserts that every session of evs reads back from s as
// projection.Fold of its events.
func checkEquivalent(t testing.TB, s *Store, evs []event.Event) {
	t.Helper()
	ctx := context.Background()
	for sid, sevs := range bySession(evs) {
		var want, strict projection.State
		rejected := 0
		for _, e := range sevs {
			if want.ID != "" || e.Type == event.SessionCreated { // no fault before the session exists
				_ = projection.ApplyLog(&strict, e)
			}
			if projection.Apply(&want, e) != nil {
				rejected++
			}
		}
		want.Fault = strict.Fault
		status := want.Status
		if strict.Fault != nil {
			status = strict.Fault.Status()
		}
		row, err := s.GetSession(ctx, sid)
		if want.ID == "" {
			if err == nil {
				t.Fatalf("session %q was never created but has a row", sid)
			}
			continue
		}
		if err != nil {
			t.Fatalf("get %q: %v", sid, err)
		}
		wantRow := wire.SessionSummary{ID: want.ID, Status: status, Fault: strict.Fault, Turn: want.Turn, Config: want.Config,
			ForkedFrom: want.ForkedFrom, Labels: want.Labels, Epoch: want.Epoch, Node: want.Node,
			Title: title(want.Messages), CreatedAt: want.CreatedAt.UTC(), UpdatedAt: want.UpdatedAt.UTC(),
			LastSeq: want.LastSeq, Events: want.Events, Rejected: rejected, Messages: len(want.Messages),
			Steps: len(want.Steps), Usage: want.Usage, Cost: want.Cost, Summaries: want.Summaries, Trims: want.Trims,
			LastOutput: want.LastOutput, LastError: want.LastError, LastCode: want.LastCode, Budget: wire.BudgetOf(&want),
			Parent: want.Parent, Definitions: want.Definitions}
		row.Children, row.Tree = nil, nil // from the other sessions' rows, not this fold
		sameJSON(t, sid+" row", row, wantRow)

		msgs, err := s.Messages(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		wantMsgs := want.Messages
		if wantMsgs == nil {
			wantMsgs = []llm.Message{}
		}
		sameJSON(t, sid+" messages", msgs, wantMsgs)
		steps, err := s.Steps(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, sid+" steps", steps, want.Steps)
		calls, err := s.ToolCalls(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, sid+" tool calls", calls, want.ToolCalls)
		arts, err := s.Artifacts(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, sid+" artifacts", arts, want.Artifacts)
		cps, err := s.Checkpoints(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, sid+" checkpoints", cps, want.Checkpoints)
		st, err := s.State(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, sid+" state", st, want)
	}
}

func sameJSON(t testing.TB, what string, got, want any) {
	t.Helper()
	g, w := jsonOf(t, got), jsonOf(t, want)
	if g != w {
		t.Fatalf("%s differs from the fold:\n got: %s\nwant: %s", what, g, w)
	}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dump renders every row of every table but snapshots (whose timing depends
// on batch boundaries, not on the events), for comparing two databases.
func dump(t testing.TB, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := []string{"sessions", "session_labels", "messages", "steps", "tool_calls", "artifacts", "checkpoints", "rejections", "positions"}
	var sb strings.Builder
	for _, tbl := range tables {
		rows, err := db.Query("SELECT * FROM " + tbl)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for i, c := range cols {
				v := vals[i]
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				parts = append(parts, fmt.Sprintf("%s=%v", c, v))
			}
			lines = append(lines, strings.Join(parts, " "))
		}
		rows.Close()
		sort.Strings(lines)
		fmt.Fprintf(&sb, "== %s (%d)\n%s\n", tbl, len(lines), strings.Join(lines, "\n"))
	}
	return sb.String()
}
