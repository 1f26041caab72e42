package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// TestAPI calls every endpoint of the API against a real node, and checks
// that each is covered.
func TestAPI(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	c := connect(t, n)

	created, err := c.Create(ctx, wire.CreateRequest{Session: "s_api", Labels: map[string]string{"k": "v"}})
	if err != nil || created.Session != "s_api" || created.Seq == 0 {
		t.Fatalf("create: %+v %v", created, err)
	}
	if out := run(t, c, "s_api", "hello"); out.Status != "completed" || out.Content != "hi" {
		t.Fatalf("run: %+v", out)
	}
	one := 1
	calls := map[string]func() error{
		wire.EndpointCreate: func() error { _, err := c.Create(ctx, wire.CreateRequest{}); return err },
		wire.EndpointGet: func() error {
			// The row is the read model's, which follows the log a moment
			// behind: the run's turn shows there soon.
			return natstest.Poll(30*time.Second, 20*time.Millisecond, func() error {
				s, err := c.Get(ctx, "s_api")
				switch {
				case err != nil:
					return natstest.Permanent(err)
				case s.ID != "s_api" || s.Labels["k"] != "v":
					t.Errorf("get: %+v", s)
				case s.Turn != 1:
					return fmt.Errorf("the read model shows turn %d, not 1", s.Turn)
				}
				return nil
			})
		},
		wire.EndpointList: func() error {
			r, err := c.List(ctx, wire.ListRequest{Limit: 10})
			if err == nil && !slices.ContainsFunc(r.Sessions, func(s wire.SessionSummary) bool { return s.ID == "s_api" }) {
				t.Errorf("list: %+v", r)
			}
			return err
		},
		wire.EndpointFork: func() error {
			r, err := c.Fork(ctx, wire.ForkRequest{Session: "s_api", Turns: &one})
			if err == nil && (r.ForkedFrom != "s_api" || r.Session == "") {
				t.Errorf("fork: %+v", r)
			}
			return err
		},
		wire.EndpointMessages: func() error {
			r, err := c.Messages(ctx, "s_api")
			if err == nil && (len(r.Messages) != 2 || r.Messages[1].Content != "hi") {
				t.Errorf("messages: %+v", r)
			}
			return err
		},
		wire.EndpointSteps: func() error {
			r, err := c.Steps(ctx, wire.StepsRequest{Session: "s_api", Brief: true})
			if err == nil && (len(r.Steps) != 1 || r.Steps[0].RequestRef == nil || r.Steps[0].RequestRef.History != 1) {
				t.Errorf("steps: %+v", r)
			}
			return err
		},
		wire.EndpointRequest: func() error {
			steps, err := c.Steps(ctx, wire.StepsRequest{Session: "s_api"})
			if err != nil {
				return err
			}
			r, err := c.StepRequest(ctx, "s_api", steps.Steps[0].ID)
			if err == nil && (!r.Verified || r.SHA256 != steps.Steps[0].RequestRef.RequestSHA256 ||
				len(r.Request.Messages) != 1 || r.Request.Messages[0].Content != "hello") {
				t.Errorf("request: %+v", r)
			}
			return err
		},
		wire.EndpointEvents: func() error {
			r, err := c.Events(ctx, wire.EventsRequest{Session: "s_api", Limit: 1})
			if err == nil && (len(r.Events) != 1 || r.Events[0].Type != event.SessionCreated || r.LastSeq <= r.Events[0].Seq) {
				t.Errorf("events: %+v", r)
			}
			return err
		},
		wire.EndpointCompact: func() error {
			r, err := c.Command(ctx, wire.CommandCompact, wire.CommandRequest{Session: "s_api"})
			if err == nil && (r.InputID == "" || r.Command != wire.CommandCompact) {
				t.Errorf("compact: %+v", r)
			}
			return err
		},
		wire.EndpointResume: func() error {
			_, err := c.Command(ctx, wire.CommandResume, wire.CommandRequest{Session: "s_api"})
			return err
		},
		wire.EndpointCancel: func() error {
			_, err := c.Command(ctx, wire.CommandCancel, wire.CommandRequest{Session: "s_api", Reason: "test"})
			return err
		},
		wire.EndpointApprove: func() error {
			// Arguments go with exactly one call: the API refuses the request.
			_, err := c.Command(ctx, wire.CommandApprove, wire.CommandRequest{Session: "s_api", Decision: &wire.Decision{Arguments: []byte(`{}`)}})
			if !errors.Is(err, client.ErrBadRequest) {
				return fmt.Errorf("approve with arguments and no call: %v", err)
			}
			_, err = c.Command(ctx, wire.CommandApprove, wire.CommandRequest{Session: "s_api", Decision: &wire.Decision{Calls: []string{"c1"}}})
			return err
		},
		wire.EndpointDeny: func() error {
			r, err := c.Command(ctx, wire.CommandDeny, wire.CommandRequest{Session: "s_api", Decision: &wire.Decision{Note: "no"}})
			if err == nil && r.Command != wire.CommandDeny {
				t.Errorf("deny: %+v", r)
			}
			return err
		},
		wire.EndpointBudget: func() error {
			// A budget command without a change: the API refuses the request.
			_, err := c.Command(ctx, wire.CommandBudget, wire.CommandRequest{Session: "s_api"})
			if !errors.Is(err, client.ErrBadRequest) {
				return fmt.Errorf("budget without a change: %v", err)
			}
			tokens := int64(1000)
			r, err := c.Command(ctx, wire.CommandBudget, wire.CommandRequest{Session: "s_api", Budget: &wire.BudgetChange{Turn: &wire.LimitsChange{Tokens: &tokens}}})
			if err == nil && (r.InputID == "" || r.Command != wire.CommandBudget) {
				t.Errorf("budget: %+v", r)
			}
			return err
		},
		wire.EndpointTools: func() error {
			r, err := c.Tools(ctx)
			if err == nil && r.Tools == nil {
				t.Errorf("tools: %+v", r)
			}
			return err
		},
		wire.EndpointStatus: func() error {
			r, err := c.Status(ctx)
			if err == nil && (r.APIVersion != wire.APIVersion || r.Partitions != 2 || r.LogShards != wire.DefaultShards ||
				len(r.ReadModelAt) != r.LogShards) {
				t.Errorf("status: %+v", r)
			}
			return err
		},
		wire.EndpointArtifacts: func() error {
			r, err := c.Artifacts(ctx, "s_api")
			if err == nil && (r.Session != "s_api" || r.Artifacts == nil || len(r.Artifacts) != 0) {
				t.Errorf("artifacts: %+v", r)
			}
			return err
		},
		wire.EndpointSchedule: func() error {
			// Two of at, every and cron: the API refuses the request.
			_, err := c.Schedule(ctx, wire.ScheduleRequest{Session: "s_api", Every: "1h", Cron: "@daily", Text: "x"})
			if !errors.Is(err, client.ErrBadRequest) {
				return fmt.Errorf("schedule with every and cron: %v", err)
			}
			r, err := c.Schedule(ctx, wire.ScheduleRequest{Session: "s_api", Name: "later", Every: "1h", Text: "later"})
			if err == nil && (r.Name != "later" || r.Spec != "@every 1h0m0s") {
				t.Errorf("schedule: %+v", r)
			}
			return err
		},
		wire.EndpointSchedules: func() error {
			list, err := c.Schedules(ctx, "s_api")
			if err == nil && (len(list) != 1 || list[0].Name != "later" || list[0].Text != "later") {
				t.Errorf("schedules: %+v", list)
			}
			return err
		},
		wire.EndpointUnschedule: func() error {
			removed, err := c.Unschedule(ctx, "s_api", "later")
			if err == nil && !removed {
				t.Errorf("unschedule: nothing removed")
			}
			return err
		},
		wire.EndpointReplay: func() error { // replay/replay_test.go replays more
			r, err := c.Replay(ctx, wire.ReplayRequest{Session: "s_api"})
			if err == nil && (r.Session != "s_api" || !r.Identical || r.Steps < 1 || r.Turns < 1) {
				t.Errorf("replay: %+v", r)
			}
			return err
		},
		wire.EndpointReplayLive: func() error { // replay_live_test.go goes live; an identical replay makes no session
			r, err := c.ReplayLive(ctx, wire.ReplayLiveRequest{Session: "s_api"})
			if err == nil && (!r.Identical || r.Live != nil) {
				t.Errorf("replay live: %+v", r)
			}
			return err
		},
		wire.EndpointArtifact: func() error { // node/artifacts_test.go reads one; here, none to read
			_, err := c.ArtifactPiece(ctx, wire.ArtifactRequest{Session: "s_api", Artifact: "nope.txt"})
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Code == wire.APIErrNotFound {
				return nil
			}
			return fmt.Errorf("artifact: an unknown one is not a 404: %w", err)
		},
	}
	for _, e := range wire.Endpoints() {
		call, ok := calls[e.Name]
		if !ok {
			t.Errorf("endpoint %s is not covered", e.Name)
			continue
		}
		if err := call(); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		delete(calls, e.Name)
	}
	if len(calls) > 0 {
		t.Errorf("calls of endpoints that do not exist: %v", calls)
	}
}

func TestAPIErrors(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	c := connect(t, n)
	if _, err := c.Create(ctx, wire.CreateRequest{Session: "s_dup"}); err != nil {
		t.Fatal(err)
	}
	var ae *client.APIError
	_, err := c.Create(ctx, wire.CreateRequest{Session: "s_dup"})
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ae) || ae.Endpoint != wire.EndpointCreate || ae.Code != wire.APIErrConflict {
		t.Errorf("create twice: %v", err)
	}
	_, err = c.Get(ctx, "s_nope")
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "s_nope") {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := c.Fork(ctx, wire.ForkRequest{Session: "s_nope"}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("fork unknown: %v", err)
	}
	minus := -1
	if _, err := c.Fork(ctx, wire.ForkRequest{Session: "s_dup", Turns: &minus}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("fork with negative turns: %v", err)
	}
	if _, err := c.List(ctx, wire.ListRequest{Before: "not a cursor"}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("list with a bad cursor: %v", err)
	}
	if _, err := c.StepRequest(ctx, "s_dup", "llm9.9"); !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "no step llm9.9") {
		t.Errorf("request of an unknown step: %v", err)
	}
	if _, err := c.StepRequest(ctx, "s_dup", ""); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("request without a step: %v", err)
	}
	// Ids that cannot be a session's are refused before anything is sent.
	for _, call := range []func() error{
		func() error { _, err := c.Get(ctx, "a.b.c"); return err },
		func() error { _, err := c.Events(ctx, wire.EventsRequest{Session: ""}); return err },
		func() error { _, err := c.Create(ctx, wire.CreateRequest{Session: "two words"}); return err },
		func() error { _, err := c.Run(ctx, "a.*", wire.Input{Text: "x"}); return err },
	} {
		if err := call(); !errors.Is(err, event.ErrInvalidSessionID) {
			t.Errorf("invalid id: %v", err)
		}
	}
	if _, err := c.Command(ctx, wire.CommandRun, wire.CommandRequest{Session: "s_dup"}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("run through the API: %v", err)
	}
}

// TestStepRequest: each LLM step's request comes back rebuilt from the log
// and verified, the second with the first's tool call and its result; a tool
// step has no request.
func TestStepRequest(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.CallTool("nowhere", `{"path": "<a>"}`), mock.Say("done")))
	c := connect(t, n)
	sid := newSession(t, c)
	if o := run(t, c, sid, "go"); o.Status != "completed" {
		t.Fatalf("%+v", o)
	}
	steps, err := c.Steps(ctx, wire.StepsRequest{Session: sid})
	if err != nil || len(steps.Steps) != 3 {
		t.Fatalf("steps %+v %v", steps, err)
	}
	last, err := c.StepRequest(ctx, sid, steps.Steps[2].ID)
	if err != nil || !last.Verified || last.Recorded || last.SHA256 != steps.Steps[2].RequestRef.RequestSHA256 {
		t.Fatalf("%+v %v", last, err)
	}
	msgs := last.Request.Messages
	if len(msgs) != 3 || msgs[1].ToolCalls[0].Name != "nowhere" || msgs[2].Role != "tool" || !msgs[2].IsError {
		t.Fatalf("the second request: %+v", msgs)
	}
	var ae *client.APIError
	if _, err := c.StepRequest(ctx, sid, steps.Steps[1].ID); !errors.Is(err, client.ErrBadRequest) || !errors.As(err, &ae) ||
		!strings.Contains(ae.Message, "tool step") {
		t.Fatalf("request of a tool step: %v", err)
	}
}

// TestLogPagesThroughLargeEvents: Log reads every event even when a page of
// them would not fit in a message (the node answers 413; Log asks for less).
func TestLogPagesThroughLargeEvents(t *testing.T) {
	ctx := ctxT(t)
	long := strings.Repeat("word ", 1600) // 8 KB in llm.completed, and again in agent.finished
	n := startNode(t, mock.Scripted(mock.Say(long).Always()), func(c *bus.Config) { c.MaxPayload = 48 << 10 })
	c := connect(t, n)
	sid := newSession(t, c)
	for range 3 {
		if o := run(t, c, sid, "talk"); o.Status != "completed" {
			t.Fatalf("%+v", o)
		}
	}
	if _, err := c.Events(ctx, wire.EventsRequest{Session: sid}); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("all events in one page: %v, want ErrTooLarge", err)
	}
	var evs []event.Event
	for ev, err := range c.Log(ctx, sid, 0) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	// Each turn is two records: turn.started and llm.started, then
	// llm.completed and agent.finished.
	if len(evs) < 3*4 {
		t.Fatalf("log: %d events", len(evs))
	}
	for i := 1; i < len(evs); i++ {
		if !evs[i-1].Before(evs[i]) {
			t.Fatalf("log out of order or twice at %d: %d.%d after %d.%d", i, evs[i].Seq, evs[i].Index, evs[i-1].Seq, evs[i-1].Index)
		}
	}
	// From a record's sequence on: that whole record and what follows.
	k := slices.IndexFunc(evs, func(e event.Event) bool { return e.Type == event.LLMCompleted })
	var from []event.Event
	for ev, err := range c.Log(ctx, sid, evs[k].Seq) {
		if err != nil {
			t.Fatal(err)
		}
		from = append(from, ev)
	}
	if len(from) != len(evs)-k || from[0].Seq != evs[k].Seq || from[0].Index != 0 {
		t.Fatalf("log from %d: %d events from %d.%d, want %d", evs[k].Seq, len(from), from[0].Seq, from[0].Index, len(evs)-k)
	}
	if _, err := c.Run(ctx, sid, wire.Input{Text: strings.Repeat("a", 48<<10)}); !errors.Is(err, client.ErrPayloadTooLarge) {
		t.Fatalf("an input over the max payload: %v", err)
	}
}

// TestNoNode: NATS without a TAH node: the API has no responders, and there
// is no stream to follow or publish to.
func TestNoNode(t *testing.T) {
	ctx := ctxT(t)
	srv := bustest.Server(t)
	c, err := client.Connect(ctx, client.Options{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Get(ctx, "s_1"); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("get: %v", err)
	}
	if _, err := c.Run(ctx, "s_1", wire.Input{Text: "hi"}); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("run: %v", err)
	}
	if _, err := c.Follow(ctx, "s_1", 0); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("follow: %v", err)
	}
}

// TestReadsAreRetried: a request that reads is tried again when a try gets
// no answer (a node paused in the API's queue group took it); one that
// writes is not.
func TestReadsAreRetried(t *testing.T) {
	ctx := ctxT(t)
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	var gets, creates atomic.Int64
	// A node that misses the first request of each kind.
	answer := func(count *atomic.Int64, body string) nats.MsgHandler {
		return func(m *nats.Msg) {
			if count.Add(1) > 1 {
				_ = m.Respond([]byte(body))
			}
		}
	}
	if _, err := nc.QueueSubscribe(wire.APISubject(wire.EndpointGet), wire.APIQueueGroup, answer(&gets, `{"id":"s_1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.QueueSubscribe(wire.APISubject(wire.EndpointCreate), wire.APIQueueGroup, answer(&creates, `{"session":"s_2"}`)); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	c, err := client.Connect(ctx, client.Options{URL: srv.ClientURL(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s, err := c.Get(ctx, "s_1"); err != nil || s.ID != "s_1" || gets.Load() != 2 {
		t.Errorf("get: %+v %v after %d tries", s, err, gets.Load())
	}
	if _, err := c.Create(ctx, wire.CreateRequest{}); !errors.Is(err, client.ErrUnavailable) || creates.Load() != 1 {
		t.Errorf("create: %v after %d tries", err, creates.Load())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Status(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v", err)
	}
}

// TestRecordsStayWhole: a fork's first record holds session.created and
// session.forked; the events API, Log and Follow hand out both, never one
// without the other (a page asked for one event gets the whole record).
func TestRecordsStayWhole(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	c := connect(t, n)
	src := newSession(t, c)
	run(t, c, src, "hello")
	f, err := c.Fork(ctx, wire.ForkRequest{Session: src})
	if err != nil {
		t.Fatal(err)
	}
	whole := func(what string, evs []event.Event) {
		t.Helper()
		if len(evs) < 2 || evs[0].Type != event.SessionCreated || evs[1].Type != event.SessionForked ||
			evs[1].Seq != evs[0].Seq || evs[1].Index != 1 || evs[0].Seq != f.Seq {
			t.Fatalf("%s: %+v", what, evs)
		}
	}
	page, err := c.Events(ctx, wire.EventsRequest{Session: f.Session, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	whole("a page of one event", page.Events)
	var logged []event.Event
	for ev, err := range c.Log(ctx, f.Session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		logged = append(logged, ev)
	}
	whole("Log", logged)
	fl, err := c.Follow(ctx, f.Session, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	whole("Follow", []event.Event{<-fl.Events(), <-fl.Events()})
}
