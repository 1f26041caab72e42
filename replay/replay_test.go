package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/llm/openai"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// The tests record sessions on a real node (embedded NATS, SQLite, the
// session actors) with the mock model or the OpenAI provider against a
// test server, then replay them through the node's API: a count of the
// model's requests and of the tool's runs shows that a replay makes none.

const prompt = "You count things."

var countSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)

// rig is a node with one counting tool, and a client of it.
type rig struct {
	t    *testing.T
	n    *node.Node
	c    *client.Client
	runs atomic.Int64 // the counting tool's runs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start starts a node answering with p, its sessions configured by cfg,
// and connects a client.
func start(t *testing.T, p llm.Provider, cfg session.Config, approval session.ApprovalPolicy) *rig {
	t.Helper()
	r := &rig{t: t}
	count := tools.Func(tools.Spec{Name: "count", Description: "Counts one more.", Schema: countSchema},
		func(context.Context, json.RawMessage) (tools.Result, error) {
			return tools.Text(fmt.Sprintf("counted %d", r.runs.Add(1))), nil
		})
	bc := bus.Default()
	bc.DataDir, bc.Port, bc.Partitions = t.TempDir(), -1, 2
	n, err := node.Start(ctxT(t), node.Options{Bus: bc, Provider: p, Tools: tools.MustRegistry(count), Session: cfg,
		Approval: approval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctxT(t), client.Options{URL: n.Bus().ClientURL(), CredsFile: localnode.AdminCredsPath(bc.DataDir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r.n, r.c = n, c
	return r
}

// session creates a session.
func (r *rig) session() string {
	r.t.Helper()
	s, err := r.c.Create(ctxT(r.t), wire.CreateRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	return s.Session
}

// run runs text as a turn of sid and returns its outcome.
func (r *rig) run(sid, text string) wire.Outcome {
	r.t.Helper()
	turn, err := r.c.Run(ctxT(r.t), sid, wire.Input{Text: text})
	if err != nil {
		r.t.Fatal(err)
	}
	defer turn.Close()
	o, err := turn.Outcome(ctxT(r.t))
	if err != nil {
		r.t.Fatalf("run %q: %v", text, err)
	}
	return o
}

// replay replays sid through the API.
func (r *rig) replay(req wire.ReplayRequest) replay.Report {
	r.t.Helper()
	rep, err := r.c.Replay(ctxT(r.t), req)
	if err != nil {
		r.t.Fatalf("replay %+v: %v", req, err)
	}
	return rep
}

// events is sid's log.
func (r *rig) events(sid string) []event.Event {
	r.t.Helper()
	var out []event.Event
	for e, err := range r.c.Log(ctxT(r.t), sid, 0) {
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// llmSteps are the ids of sid's LLM steps, in order.
func (r *rig) llmSteps(sid string) []string {
	var ids []string
	for _, e := range r.events(sid) {
		if e.Type == event.LLMStarted {
			d, _ := event.DecodeAs[event.LLMStartedData](e)
			ids = append(ids, d.StepID)
		}
	}
	return ids
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// countTurn is the mock's turn of "count please": a call of count, then an
// answer.
func countTurn(text, answer string) []mock.Reply {
	return []mock.Reply{
		{Prompt: text, AfterTool: no(), ToolCalls: []llm.ToolCall{{ID: "c_" + strings.ReplaceAll(text, " ", "_"), Name: "count", Arguments: json.RawMessage(`{"n":1}`)}}},
		{Prompt: text, AfterTool: yes(), Text: answer},
	}
}

// A session recorded with the mock replays identically under the node's
// own definition, over every turn, one turn, or from a step, with no model
// call and no tool run; a changed system prompt diverges at the first LLM
// step of the first turn, naming the system message; a changed tool schema
// where the tool is offered; a changed model and maxSteps say so.
func TestReplayMock(t *testing.T) {
	var replies []mock.Reply
	replies = append(replies, countTurn("count please", "counted once")...)
	replies = append(replies, mock.Reply{Prompt: "just talk", Text: "talking"})
	replies = append(replies, countTurn("count again", "counted twice")...)
	p := mock.Scripted(replies...)
	r := start(t, p, session.Config{SystemPrompt: prompt}, session.ApprovalPolicy{})
	sid := r.session()
	for _, text := range []string{"count please", "just talk", "count again"} {
		if o := r.run(sid, text); o.Status != "completed" {
			t.Fatalf("%q: %+v", text, o)
		}
	}
	calls, runs := len(p.Calls()), r.runs.Load()
	if calls != 5 || runs != 2 {
		t.Fatalf("recorded %d model calls and %d tool runs, want 5 and 2", calls, runs)
	}

	rep := r.replay(wire.ReplayRequest{Session: sid})
	if !rep.Identical || rep.Divergence != nil || rep.Turns != 3 || rep.Steps != 5 || rep.Session != sid {
		t.Fatalf("same definition: %+v", rep)
	}
	if got := rep.Summary(); got != "identical over 3 turns, 5 LLM steps" {
		t.Errorf("summary: %q", got)
	}
	if d := rep.Definition; d.SystemPromptChars != len(prompt) || len(d.Tools) != 1 || d.Tools[0] != "count" || d.MaxSteps != session.DefaultMaxSteps {
		t.Errorf("definition: %+v", d)
	}
	if one := r.replay(wire.ReplayRequest{Session: sid, Turn: 2}); !one.Identical || one.Turns != 1 || one.Steps != 1 {
		t.Errorf("turn 2: %+v", one)
	}
	steps := r.llmSteps(sid)
	if from := r.replay(wire.ReplayRequest{Session: sid, FromStep: steps[2]}); !from.Identical || from.Turns != 2 || from.Steps != 3 {
		t.Errorf("from %s: %+v", steps[2], from)
	}

	// A changed system prompt: the first step of the first turn, message 0.
	terse := "You count things, tersely."
	rep = r.replay(wire.ReplayRequest{Session: sid, SystemPrompt: &terse})
	d := rep.Divergence
	if rep.Identical || d == nil || d.Turn != 1 || d.Step != 1 || d.StepID != steps[0] || d.Kind != replay.KindRequest ||
		d.RecordedSHA256 == "" || d.ReplayedSHA256 == "" || d.RecordedSHA256 == d.ReplayedSHA256 || rep.Steps != 0 {
		t.Fatalf("changed prompt: %+v", rep)
	}
	if len(d.Diffs) != 1 || d.Diffs[0].What != "message" || *d.Diffs[0].Index != 0 || d.Diffs[0].Role != "system" ||
		d.Diffs[0].Field != "content" || d.Diffs[0].Recorded != prompt || d.Diffs[0].Replayed != terse {
		t.Errorf("changed prompt's diff: %+v", d.Diffs)
	}
	text := d.Text()
	for _, want := range []string{"diverged at turn 1, LLM step 1 (" + steps[0], "message 0 (system), content", `recorded: "You count things."`,
		`replay:   "You count things, tersely."`, d.RecordedSHA256, d.ReplayedSHA256} {
		if !strings.Contains(text, want) {
			t.Errorf("the divergence's text lacks %q:\n%s", want, text)
		}
	}
	// No prompt at all: the replay's history has one message fewer.
	none := ""
	if d := r.replay(wire.ReplayRequest{Session: sid, SystemPrompt: &none}).Divergence; d == nil || d.Step != 1 || d.Turn != 1 ||
		d.Diffs[0].What != "message" || d.Diffs[0].Field != "role" {
		t.Errorf("no prompt: %+v", d)
	}

	// A changed tool schema: where the tool is offered, named with its
	// schema; with --turn 2, that turn's first step.
	changed := []llm.ToolSchema{{Name: "count", Description: "Counts one more.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`)}}
	for _, turn := range []int{0, 2} {
		rep = r.replay(wire.ReplayRequest{Session: sid, Turn: turn, Tools: &changed})
		d = rep.Divergence
		want := max(turn, 1)
		if d == nil || d.Turn != want || d.Step != 1 || len(d.Diffs) != 1 || d.Diffs[0].What != "tool" || d.Diffs[0].Name != "count" ||
			d.Diffs[0].Field != "input_schema" || !strings.Contains(d.Diffs[0].Replayed, `"number"`) {
			t.Errorf("changed schema, turn %d: %+v", turn, rep)
		}
	}
	if d := r.replay(wire.ReplayRequest{Session: sid, Tools: &[]llm.ToolSchema{}}).Divergence; d == nil || d.Diffs[0].Field != "removed" {
		t.Errorf("no tools: %+v", d)
	}

	// The model, and maxSteps: turn 1 makes two LLM steps.
	if d := r.replay(wire.ReplayRequest{Session: sid, Model: "other-model"}).Divergence; d == nil || d.Step != 1 || d.Diffs[0].What != "model" ||
		d.Diffs[0].Replayed != "other-model" {
		t.Errorf("changed model: %+v", d)
	}
	one := 1
	if d := r.replay(wire.ReplayRequest{Session: sid, MaxSteps: &one}).Divergence; d == nil || d.Kind != replay.KindMaxSteps || d.Turn != 1 || d.Step != 2 {
		t.Errorf("max_steps 1: %+v", d)
	}

	// Not one model call, not one tool run.
	if got := len(p.Calls()); got != calls {
		t.Errorf("the replays called the model %d times", got-calls)
	}
	if got := r.runs.Load(); got != runs {
		t.Errorf("the replays ran the tool %d times", got-runs)
	}

	// What a replay cannot be asked.
	ctx := ctxT(t)
	if _, err := r.c.Replay(ctx, wire.ReplayRequest{Session: "s_nope"}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if _, err := r.c.Replay(ctx, wire.ReplayRequest{Session: sid, Turn: 9}); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "3 turn(s), no turn 9") {
		t.Errorf("turn 9: %v", err)
	}
	if _, err := r.c.Replay(ctx, wire.ReplayRequest{Session: sid, FromStep: "llm9.99"}); !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "no step llm9.99") {
		t.Errorf("unknown step: %v", err)
	}
	minus := -1
	if _, err := r.c.Replay(ctx, wire.ReplayRequest{Session: sid, ContextChars: &minus}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("negative context_chars: %v", err)
	}
}

// A session recorded with the OpenAI provider against a test server
// replays identically with no request to the server.
func TestReplayOpenAI(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.OpenAI{},
		llmtest.Answer{Calls: []llmtest.Call{{ID: "call_1", Name: "count", Args: []string{`{"n":`, `1}`}}}},
		llmtest.Answer{Text: []string{"counted ", "once"}},
		llmtest.Answer{Text: []string{"just ", "talking"}})
	p, err := openai.New(llmtest.Config(llm.ProviderOpenAI, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, p, session.Config{SystemPrompt: prompt, Model: "test-model"}, session.ApprovalPolicy{})
	sid := r.session()
	for _, text := range []string{"count please", "just talk"} {
		if o := r.run(sid, text); o.Status != "completed" {
			t.Fatalf("%q: %+v", text, o)
		}
	}
	requests, runs := srv.Count(), r.runs.Load()
	if requests != 3 || runs != 1 {
		t.Fatalf("recorded %d requests and %d tool runs, want 3 and 1", requests, runs)
	}
	rep := r.replay(wire.ReplayRequest{Session: sid})
	if !rep.Identical || rep.Turns != 2 || rep.Steps != 3 {
		t.Fatalf("same definition: %+v", rep)
	}
	terse := "Be terse."
	if d := r.replay(wire.ReplayRequest{Session: sid, SystemPrompt: &terse}).Divergence; d == nil || d.Turn != 1 || d.Step != 1 ||
		d.Diffs[0].Role != "system" {
		t.Errorf("changed prompt: %+v", d)
	}
	if got := srv.Count(); got != requests {
		t.Errorf("the replays sent the server %d requests", got-requests)
	}
	if got := r.runs.Load(); got != runs {
		t.Errorf("the replays ran the tool %d times", got-runs)
	}
}

// A session whose turns were held for an approval, compacted (once the
// summariser failed, and the context was trimmed instead), cancelled, and
// a fork of it, replay identically; a context budget taken away diverges
// at the compaction it made.
func TestReplayCompactionTrimApprovalCancel(t *testing.T) {
	long := strings.Repeat("counted once. ", 40)
	var replies []mock.Reply
	replies = append(replies,
		mock.Reply{Compaction: yes(), Error: &mock.Error{Status: 500, Message: "the summariser is down"}},
		mock.Reply{Compaction: yes(), Text: "the user counted, then talked"})
	replies = append(replies, countTurn("count please", long)...)
	replies = append(replies,
		mock.Reply{Prompt: "second", Compaction: no(), Text: "two"},
		mock.Reply{Prompt: "third", Compaction: no(), Text: "three"},
		mock.Reply{Prompt: "fourth", Compaction: no(), Text: "four", Hold: mock.Duration(10 * time.Minute)},
		mock.Reply{Prompt: "fifth", Compaction: no(), Text: "five"},
		mock.Reply{Prompt: "in the fork", Compaction: no(), Text: "forked"})
	p := mock.Scripted(replies...)
	r := start(t, p, session.Config{SystemPrompt: prompt, ContextChars: 400},
		session.ApprovalPolicy{Rules: map[string]string{"count": session.ApprovalAlways}})
	ctx := ctxT(t)
	sid := r.session()

	// Turn 1 waits for the count's approval.
	if o := r.run(sid, "count please"); o.Status != "waiting_tool" || len(o.AwaitingApproval) != 1 {
		t.Fatalf("turn 1: %+v", o)
	}
	turn, err := r.c.Approve(ctx, sid, wire.Decision{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := turn.Outcome(ctx); err != nil || o.Status != "completed" {
		t.Fatalf("turn 1 approved: %+v %v", o, err)
	}
	turn.Close()
	// Turn 2: over the budget, the compaction fails, the request is trimmed;
	// turn 3: the compaction succeeds.
	for _, text := range []string{"second", "third"} {
		if o := r.run(sid, text); o.Status != "completed" {
			t.Fatalf("%q: %+v", text, o)
		}
	}
	// Turn 4 is cancelled while the model answers.
	turn, err = r.c.Run(ctx, sid, wire.Input{Text: "fourth"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	if err := natstest.Poll(60*time.Second, 10*time.Millisecond, func() error {
		if calls := p.Calls(); len(calls) == 0 || !strings.Contains(calls[len(calls)-1].Messages[len(calls[len(calls)-1].Messages)-1].Content, "fourth") {
			return errors.New("the model was not asked turn 4 yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Cancel(ctx, sid, "test"); err != nil {
		t.Fatal(err)
	}
	if o, err := turn.Outcome(ctx); err != nil || o.Status != "cancelled" {
		t.Fatalf("turn 4: %+v %v", o, err)
	}
	if o := r.run(sid, "fifth"); o.Status != "completed" {
		t.Fatalf("turn 5: %+v", o)
	}
	// The log holds what the test is about.
	seen := map[event.Type]int{}
	for _, e := range r.events(sid) {
		seen[e.Type]++
	}
	for _, typ := range []event.Type{event.ToolApprovalRequested, event.ToolApproved, event.ContextCompactFailed, event.ContextTrimmed,
		event.SummaryAdded, event.ContextCompacted, event.AgentCancelled} {
		if seen[typ] == 0 {
			t.Fatalf("the log has no %s: %v", typ, seen)
		}
	}
	calls, runs := len(p.Calls()), r.runs.Load()

	rep := r.replay(wire.ReplayRequest{Session: sid})
	if !rep.Identical || rep.Turns != 5 || rep.Steps != 6 {
		t.Fatalf("same definition: %+v", rep)
	}
	for turn := 1; turn <= 5; turn++ {
		if rep := r.replay(wire.ReplayRequest{Session: sid, Turn: turn}); !rep.Identical || rep.Turns != 1 {
			t.Errorf("turn %d: %+v", turn, rep)
		}
	}
	// A changed prompt changes every request, trimmed ones and those with
	// a summary merged in.
	terse := "Count."
	if d := r.replay(wire.ReplayRequest{Session: sid, Turn: 3, SystemPrompt: &terse}).Divergence; d == nil || d.Turn != 3 || d.Diffs[0].Role != "system" ||
		!strings.HasPrefix(d.Diffs[0].Replayed, terse+"\n\n"+mock.SummaryPrefix) {
		t.Errorf("changed prompt, turn 3: %+v", d)
	}
	// Without a budget, the loop would not have compacted before turn 2.
	zero := 0
	if d := r.replay(wire.ReplayRequest{Session: sid, ContextChars: &zero}).Divergence; d == nil || d.Kind != replay.KindCompaction || d.Turn != 2 {
		t.Errorf("no budget: %+v", d)
	}

	// A fork and its next turn.
	fork, err := r.c.Fork(ctx, wire.ForkRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	if o := r.run(fork.Session, "in the fork"); o.Status != "completed" {
		t.Fatalf("fork: %+v", o)
	}
	calls++
	if rep := r.replay(wire.ReplayRequest{Session: fork.Session}); !rep.Identical || rep.Steps != 1 {
		t.Errorf("fork: %+v", rep)
	}
	if got := len(p.Calls()); got != calls {
		t.Errorf("the replays called the model %d times", got-calls)
	}
	if got := r.runs.Load(); got != runs {
		t.Errorf("the replays ran the tool %d times", got-runs)
	}
}

// A turn that ended at maxSteps replays identically; a larger maxSteps
// diverges where the recording stopped.
func TestReplayMaxSteps(t *testing.T) {
	p := mock.Scripted(countTurn("count please", "never said")[0])
	r := start(t, p, session.Config{SystemPrompt: prompt, MaxSteps: 1}, session.ApprovalPolicy{})
	sid := r.session()
	if o := r.run(sid, "count please"); o.Status != "failed" || o.Code != event.CodeMaxSteps {
		t.Fatalf("turn 1: %+v", o)
	}
	if rep := r.replay(wire.ReplayRequest{Session: sid}); !rep.Identical || rep.Steps != 1 {
		t.Fatalf("same definition: %+v", rep)
	}
	for _, max := range []int{2, 0} {
		d := r.replay(wire.ReplayRequest{Session: sid, MaxSteps: &max}).Divergence
		if d == nil || d.Kind != replay.KindMaxSteps || d.Turn != 1 || d.Step != 2 || d.Diffs[0].Recorded != "1" || d.Diffs[0].Replayed != limitText(max) {
			t.Errorf("max_steps %d: %+v", max, d)
		}
	}
}

func limitText(max int) string {
	if max == 0 {
		return "unlimited"
	}
	return fmt.Sprint(max)
}

// Run on a log read by a client, with the definition a node makes of its
// configuration: identical; a log whose recorded hash this build does not
// rebuild diverges as a rebuild; what is not a log is refused.
func TestRunOnALog(t *testing.T) {
	p := mock.Scripted(countTurn("count please", "counted once")...)
	cfg := session.Config{SystemPrompt: prompt}
	r := start(t, p, cfg, session.ApprovalPolicy{})
	sid := r.session()
	if o := r.run(sid, "count please"); o.Status != "completed" {
		t.Fatalf("turn 1: %+v", o)
	}
	evs := r.events(sid)
	ec, offered := session.Definition(cfg, r.n.ToolSchemas(), nil)
	def := replay.Definition{Config: ec, Tools: offered}
	rep, err := replay.Run(evs, def, replay.Options{})
	if err != nil || !rep.Identical || rep.Steps != 2 || rep.Events != len(evs) {
		t.Fatalf("identical: %+v %v", rep, err)
	}

	// The second step's recorded hash, changed: the request this build
	// prepares is not the one the log says was sent.
	tampered := append([]event.Event(nil), evs...)
	steps := 0
	for i, e := range tampered {
		if e.Type != event.LLMStarted {
			continue
		}
		if steps++; steps == 2 {
			d, _ := event.DecodeAs[event.LLMStartedData](e)
			d.RequestSHA256 = strings.Repeat("0", 64)
			tampered[i].Data, _ = json.Marshal(d)
		}
	}
	rep, err = replay.Run(tampered, def, replay.Options{})
	if err != nil || rep.Divergence == nil || rep.Divergence.Kind != replay.KindRebuild || rep.Divergence.Step != 2 || rep.Steps != 1 ||
		rep.Divergence.RecordedSHA256 != strings.Repeat("0", 64) {
		t.Errorf("tampered hash: %+v %v", rep, err)
	}

	if _, err := replay.Run(nil, def, replay.Options{}); !errors.Is(err, replay.ErrNoSession) {
		t.Errorf("no events: %v", err)
	}
	if _, err := replay.Run(evs[1:], def, replay.Options{}); !errors.Is(err, replay.ErrNotReplayable) {
		t.Errorf("no session.created: %v", err)
	}
}

// A steer that joined a turn held for approval replays identically: the
// steered message is in the replayed history as it was in the recorded one.
func TestReplaySteer(t *testing.T) {
	p := mock.Scripted(countTurn("count please", "")[0], mock.Reply{Prompt: "and be quick", Text: "counted quickly"})
	r := start(t, p, session.Config{SystemPrompt: prompt}, session.ApprovalPolicy{Rules: map[string]string{"count": session.ApprovalAlways}})
	ctx := ctxT(t)
	sid := r.session()
	if o := r.run(sid, "count please"); o.Status != "waiting_tool" {
		t.Fatalf("turn 1: %+v", o)
	}
	steer, err := r.c.Run(ctx, sid, wire.Input{Text: "and be quick", Options: &wire.RunOptions{WhenBusy: wire.WhenBusySteer}})
	if err != nil {
		t.Fatal(err)
	}
	defer steer.Close()
	approved, err := r.c.Approve(ctx, sid, wire.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	defer approved.Close()
	if o, err := approved.Outcome(ctx); err != nil || o.Content != "counted quickly" {
		t.Fatalf("the steered turn: %+v %v", o, err)
	}
	steered := false
	for _, e := range r.events(sid) {
		steered = steered || e.Type == event.TurnSteered
	}
	if !steered {
		t.Fatal("the log has no turn.steered")
	}
	if rep := r.replay(wire.ReplayRequest{Session: sid}); !rep.Identical || rep.Turns != 1 || rep.Steps != 2 {
		t.Fatalf("same definition: %+v", rep)
	}
}
