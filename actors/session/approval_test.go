package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// approvalTools are testTools whose echo waits for approval.
func approvalTools(tt *testTools, timeout time.Duration) ToolConfig {
	tc := tt.config()
	tc.Approval = ApprovalPolicy{Rules: map[string]string{"ec*": ApprovalAlways, "block": ApprovalNever}, Timeout: timeout}
	return tc
}

// waitForApproval runs a turn whose call waits, and returns the call's id.
func waitForApproval(t *testing.T, m *Manager, sid string) string {
	t.Helper()
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	o := do(t, m, sid, run("write it"))
	if o.Err != nil || o.Status != projection.StatusWaitingTool || len(o.AwaitingApproval) != 1 || o.AwaitingApproval[0].Name != "echo" {
		t.Fatalf("%+v", o)
	}
	return o.AwaitingApproval[0].ID
}

func decision(kind wire.Command, d wire.Decision) Command {
	return Command{Kind: kind, InputID: event.NewID("in"), Decision: &d}
}

func TestApproveRunsTheCallWithEditedArguments(t *testing.T) {
	b := openBus(t)
	tt := &testTools{}
	m := startManager(t, b, mock.Scripted(mock.CallTool("echo", `{"x":1}`), mock.Say("written")), Config{}, approvalTools(tt, 0))
	call := waitForApproval(t, m, "s1")
	if tt.ran() != 0 {
		t.Fatal("the call ran before its approval")
	}
	o := do(t, m, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{call}, Arguments: []byte(`{"x":2}`), By: "alice"}))
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "written" {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	if rec := st.ToolCall(call); rec.Approval != projection.ApprovalApproved || st.Steps[1].Output != `echo:{"x":2}` {
		t.Fatalf("%s", mustJSON(st))
	}
	if ap := events[event.ToolApprovedData](t, b, "s1", event.ToolApproved); len(ap) != 1 || ap[0].By != "alice" {
		t.Fatalf("%+v", ap)
	}
	// Two approvals of one call: the first won, the second is told.
	o = do(t, m, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{call}}))
	if !errors.Is(o.Err, ErrAlreadyDecided) || o.Wire().FailureCode != wire.FailureAlreadyDecided {
		t.Fatalf("%+v", o)
	}
	audited(t, b, "s1")
}

func TestDenyTellsTheModel(t *testing.T) {
	b := openBus(t)
	tt := &testTools{}
	p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("ok, I will not"))
	m := startManager(t, b, p, Config{}, approvalTools(tt, 0))
	waitForApproval(t, m, "s1")
	o := do(t, m, "s1", decision(wire.CommandDeny, wire.Decision{Note: "not that file"}))
	if o.Err != nil || o.Status != projection.StatusCompleted || tt.ran() != 0 {
		t.Fatalf("%+v ran %d", o, tt.ran())
	}
	st := fold(t, b, "s1")
	if res := st.Messages[len(st.Messages)-2]; res.Content != "denied by the user: not that file" || !res.IsError {
		t.Fatalf("%+v", res)
	}
	audited(t, b, "s1")
}

func TestCancelWhileWaitingAnswersEveryCall(t *testing.T) {
	b := openBus(t)
	m := startManager(t, b, mock.Scripted(mock.CallTool("echo", `{}`)), Config{}, approvalTools(&testTools{}, 0))
	call := waitForApproval(t, m, "s1")
	o := do(t, m, "s1", Command{Kind: wire.CommandCancel, Reason: "changed my mind"})
	if o.Status != projection.StatusCancelled || !o.WasRunning {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	if rec := st.ToolCall(call); !rec.HasResult || rec.Code != event.CodeCancelled {
		t.Fatalf("%s", mustJSON(st))
	}
	// Approval of the cancelled call: nothing to approve.
	o = do(t, m, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{call}}))
	if !errors.Is(o.Err, ErrNotPending) || o.Wire().FailureCode != wire.FailureNotPending {
		t.Fatalf("%+v", o)
	}
	audited(t, b, "s1")
}

func TestApproveOnTheNextNodeAfterACrash(t *testing.T) {
	b := openBus(t)
	m1 := startManager(t, b, mock.Scripted(mock.CallTool("echo", `{}`)), Config{Node: "n1"}, approvalTools(&testTools{}, 0))
	call := waitForApproval(t, m1, "s1")
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tt := &testTools{}
	m2 := startManager(t, b, mock.Scripted(mock.Say("done")), Config{Node: "n2"}, approvalTools(tt, 0))
	// A resume (a node taking the partition over) finds nothing to run.
	if o := do(t, m2, "s1", Command{Kind: wire.CommandResume}); o.Err != nil || len(o.AwaitingApproval) != 1 || tt.ran() != 0 {
		t.Fatalf("%+v", o)
	}
	// A message sent meanwhile waits behind the turn.
	ch := make(chan Outcome, 1)
	next := run("and then?")
	next.Done = func(o Outcome) { ch <- o }
	if err := m2.Deliver("s1", &next); err != nil {
		t.Fatal(err)
	}
	o := do(t, m2, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{call}}))
	if o.Err != nil || o.Status != projection.StatusCompleted || tt.ran() != 1 {
		t.Fatalf("%+v", o)
	}
	select {
	case o := <-ch:
		if o.Turn != 2 {
			t.Fatalf("%+v", o)
		}
	case <-time.After(hangBound):
		t.Fatal("the message sent while waiting never ran")
	}
	audited(t, b, "s1")
}

func TestDeadlineDenies(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("too late"))
	m := startManager(t, b, p, Config{}, approvalTools(&testTools{}, 50*time.Millisecond))
	waitForApproval(t, m, "s1")
	deadline := time.Now().Add(30 * time.Second)
	for fold(t, b, "s1").Status != projection.StatusCompleted {
		if time.Now().After(deadline) {
			t.Fatal("the deadline never denied the call")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := events[event.ToolDeniedData](t, b, "s1", event.ToolDenied); len(d) != 1 || !d[0].Expired {
		t.Fatalf("%+v", d)
	}
	audited(t, b, "s1")
}

func TestApprovalPolicy(t *testing.T) {
	p := ApprovalPolicy{Rules: map[string]string{"write_file": ApprovalAlways, "fs__*": ApprovalAlways, "fs__read*": ApprovalNever}}
	for name, want := range map[string]bool{"write_file": true, "fs__write": true, "fs__read_file": false, "echo": false} {
		if p.Needs(name) != want {
			t.Errorf("%s: %v", name, !want)
		}
	}
	if err := (ApprovalPolicy{Rules: map[string]string{"x": "sometimes"}}).Validate(); err == nil {
		t.Fatal("a rule of sometimes is valid")
	}
}

// asking is a tool that asks for approval of its calls by default, as an
// MCP tool that does not say it is read-only does (fs__write_file, say).
type asking struct{ tools.Tool }

func (asking) AsksApproval() bool { return true }

func TestToolThatAsksWaitsForApprovalByDefault(t *testing.T) {
	b := openBus(t)
	tt := &testTools{}
	echo := asking{tools.Func(tools.Spec{Name: "echo"}, tt.run("echo"))}
	// No rule names echo: its own ask decides.
	tc := ToolConfig{Catalog: tools.MustRegistry(echo), Options: tools.Options{Logger: quiet},
		Approval: ApprovalPolicy{Rules: map[string]string{"write_file": ApprovalAlways}}}
	m := startManager(t, b, mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("done")), Config{}, tc)
	call := waitForApproval(t, m, "s1")
	if tt.ran() != 0 {
		t.Fatal("the call ran before its approval")
	}
	if o := do(t, m, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{call}})); o.Err != nil || o.Status != projection.StatusCompleted || tt.ran() != 1 {
		t.Fatalf("%+v", o)
	}
	// A rule that names the tool, by name or glob, decides instead.
	for rules, want := range map[string]bool{"echo": false, "ec*": false, "*": false} {
		p := ApprovalPolicy{Rules: map[string]string{rules: ApprovalNever}}
		if p.NeedsTool("echo", echo) != want {
			t.Errorf("rule %s=never: the call waits", rules)
		}
	}
	if !(ApprovalPolicy{}).NeedsTool("echo", echo) || (ApprovalPolicy{}).NeedsTool("echo", nil) {
		t.Error("without rules, only a tool that asks waits")
	}
}
