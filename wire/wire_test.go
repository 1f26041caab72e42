package wire_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

func TestInputValidate(t *testing.T) {
	five, nan, zero, minus := 5.0, math.NaN(), int64(0), int64(-1)
	user := llm.User("hi")
	sys := llm.System("no")
	for _, c := range []struct {
		name string
		in   wire.Input
		bad  string // a part of the error, or "" for a valid input
	}{
		{"run text", wire.Input{Command: wire.CommandRun, Text: "hi"}, ""},
		{"run message", wire.Input{Command: wire.CommandRun, Message: &user, Options: &wire.RunOptions{MaxSteps: 3}}, ""},
		{"resume", wire.Input{Command: wire.CommandResume, ID: "in_1:a.b"}, ""},
		{"cancel reason", wire.Input{Command: wire.CommandCancel, Reason: "Ctrl-C", ReplyTo: "_INBOX.x.1"}, ""},
		{"cancel of an input", wire.Input{Command: wire.CommandCancel, InputID: "in_1"}, ""},
		{"cancel of a bad input id", wire.Input{Command: wire.CommandCancel, InputID: "in 1"}, "input_id"},
		{"run with input_id", wire.Input{Command: wire.CommandRun, Text: "a", InputID: "in_1"}, "run takes no input_id"},
		{"resume with input_id", wire.Input{Command: wire.CommandResume, InputID: "in_1"}, "resume takes no input_id"},
		{"compact", wire.Input{Command: wire.CommandCompact}, ""},
		{"no command", wire.Input{Text: "hi"}, "no command"},
		{"unknown command", wire.Input{Command: "jump"}, `unknown command "jump"`},
		{"run both", wire.Input{Command: wire.CommandRun, Text: "a", Message: &user}, "both input and message"},
		{"run neither", wire.Input{Command: wire.CommandRun}, "neither input nor message"},
		{"run system message", wire.Input{Command: wire.CommandRun, Message: &sys}, `role "system"`},
		{"run reason", wire.Input{Command: wire.CommandRun, Text: "a", Reason: "x"}, "run takes no reason"},
		{"negative max steps", wire.Input{Command: wire.CommandRun, Text: "a", Options: &wire.RunOptions{MaxSteps: -1}}, "max_steps is negative"},
		{"resume with text", wire.Input{Command: wire.CommandResume, Text: "a"}, "takes no input"},
		{"compact with reason", wire.Input{Command: wire.CommandCompact, Reason: "x"}, "takes no reason"},
		{"bad id", wire.Input{Command: wire.CommandResume, ID: "in 1"}, "not allowed"},
		{"long id", wire.Input{Command: wire.CommandResume, ID: strings.Repeat("a", 129)}, "at most 128"},
		{"wildcard reply", wire.Input{Command: wire.CommandResume, ReplyTo: "a.*"}, "not a subject"},
		{"empty token reply", wire.Input{Command: wire.CommandResume, ReplyTo: "a..b"}, "not a subject"},
		{"budget", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Session: &wire.LimitsChange{CostUSD: &five}},
			Decision: &wire.Decision{By: "ann"}}, ""},
		{"budget removing a limit", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Turn: &wire.LimitsChange{TimeMS: &zero}}}, ""},
		{"budget of nothing", wire.Input{Command: wire.CommandBudget}, "budget without a budget"},
		{"budget changing nothing", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Turn: &wire.LimitsChange{}}}, "changes no limit"},
		{"budget negative", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Turn: &wire.LimitsChange{Tokens: &minus}}}, "negative"},
		{"budget not a number", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Session: &wire.LimitsChange{CostUSD: &nan}}}, "not a number"},
		{"budget with calls", wire.Input{Command: wire.CommandBudget, Budget: &wire.BudgetChange{Session: &wire.LimitsChange{CostUSD: &five}},
			Decision: &wire.Decision{Calls: []string{"c1"}}}, "takes no calls"},
		{"run with a budget change", wire.Input{Command: wire.CommandRun, Text: "a", Budget: &wire.BudgetChange{Session: &wire.LimitsChange{CostUSD: &five}}}, "run takes no budget"},
		{"run with its own budget", wire.Input{Command: wire.CommandRun, Text: "a", Options: &wire.RunOptions{Budget: &event.Limits{Tokens: 5}}}, ""},
		{"run with a negative budget", wire.Input{Command: wire.CommandRun, Text: "a", Options: &wire.RunOptions{Budget: &event.Limits{CostUSD: -1}}}, "options.budget"},
	} {
		err := c.in.Validate()
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !errors.Is(err, wire.ErrMalformedInput)):
			t.Errorf("%s: got %v, want an ErrMalformedInput saying %q", c.name, err, c.bad)
		}
	}
}

// TestInputJSON: the command and the reply subject are headers, never body
// fields, and the body's names are the protocol's.
func TestInputJSON(t *testing.T) {
	in := wire.Input{ID: "in_1", Command: wire.CommandRun, ReplyTo: "_INBOX.a", Text: "hi", Options: &wire.RunOptions{MaxSteps: 2}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"id":"in_1","input":"hi","options":{"max_steps":2}}`; got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	if m := in.UserMessage(); m.Role != llm.RoleUser || m.Content != "hi" || in.MaxSteps() != 2 {
		t.Fatalf("user message %+v, max steps %d", m, in.MaxSteps())
	}
	if (wire.Input{}).MaxSteps() != 0 {
		t.Fatal("max steps without options")
	}
}

// TestInputMsgID: an input's Nats-Msg-Id carries its session, and the id a
// node reads back from it is the input's, whatever the form.
func TestInputMsgID(t *testing.T) {
	if got := wire.InputMsgID("s_1", "in_1"); got != "s_1:in_1" {
		t.Fatalf("InputMsgID: %s", got)
	}
	for _, c := range []struct{ sid, msgID, want string }{
		{"s_1", "s_1:in_1", "in_1"},
		{"s_1", "s_1:in:with:colons", "in:with:colons"},
		{"s_1", "in_1", "in_1"},         // a bare id, as older clients send
		{"s_1", "s_2:in_1", "s_2:in_1"}, // another session's prefix is no prefix
		{"s_1", "s_1:", "s_1:"},
		{"", ":in_1", ":in_1"},
	} {
		if got := wire.InputIDOfMsgID(c.sid, c.msgID); got != c.want {
			t.Errorf("InputIDOfMsgID(%q, %q) = %q, want %q", c.sid, c.msgID, got, c.want)
		}
	}
}

func TestSubjects(t *testing.T) {
	sid := "s_4f2k9q1w7e3r5t6y8v0b"
	for got, want := range map[string]string{
		wire.ShardSubject(5, sid):          "tah.evt.5.s_4f2k9q1w7e3r5t6y8v0b",
		wire.ShardSubjects(5):              "tah.evt.5.>",
		wire.EventShardStream(5):           "TAH_EVT_5",
		wire.LegacySessionEvents(sid):      "tah.sess.s_4f2k9q1w7e3r5t6y8v0b.evt.>",
		wire.InputSubject(sid, ""):         "tah.sess.s_4f2k9q1w7e3r5t6y8v0b.in",
		wire.PartitionSubject(3, sid, ""):  "tah.in.3.s_4f2k9q1w7e3r5t6y8v0b",
		wire.PartitionFilter(3):            "tah.in.3.>",
		wire.PartitionConsumer(3):          "tah_in_3",
		wire.InputTransform(16):            "tah.in.{{partition(16,1)}}.{{wildcard(1)}}.{{wildcard(2)}}",
		wire.UnnamedInputTransform(16):     "tah.in.{{partition(16,1)}}.{{wildcard(1)}}",
		wire.DeltaSubject(sid):             "tah.sess.s_4f2k9q1w7e3r5t6y8v0b.delta",
		wire.ErrorSubject(sid):             "tah.sess.s_4f2k9q1w7e3r5t6y8v0b.err",
		wire.NodeSubject("n1"):             "tah.nodes.n1",
		wire.APISubject(wire.EndpointFork): "tah.api.fork",
		wire.ToolSubject("shout"):          "tah.tool.shout",
		wire.ToolCancelSubject("a.b"):      "tah.tool.cancel.=YS5i",
		// a tenant's session: its id is two tokens, and its inputs name their sender
		wire.ShardSubject(5, "acme."+sid):              "tah.evt.5.acme.s_4f2k9q1w7e3r5t6y8v0b",
		wire.InputSubject("acme."+sid, "alice"):        "tah.sess.acme.s_4f2k9q1w7e3r5t6y8v0b.in.alice",
		wire.PartitionSubject(3, "acme."+sid, "alice"): "tah.in.3.acme.s_4f2k9q1w7e3r5t6y8v0b.alice",
		wire.TenantInputTransform(16):                  "tah.in.{{partition(16,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}",
		wire.DeltaSubject("acme." + sid):               "tah.sess.acme.s_4f2k9q1w7e3r5t6y8v0b.delta",
		wire.ScheduleFireSubject("acme." + sid):        "tah.sched.fire.acme.s_4f2k9q1w7e3r5t6y8v0b",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if s := wire.SessionFromSubject(wire.ShardSubject(3, sid)); s != sid {
		t.Errorf("session of a shard subject: %q", s)
	}
	if s := wire.SessionFromSubject("tah.sess." + sid + ".evt.turn.started"); s != sid {
		t.Errorf("session of a legacy event subject: %q", s)
	}
	if s := wire.SessionFromSubject(wire.PartitionSubject(0, sid, "")); s != sid {
		t.Errorf("session of a partition subject: %q", s)
	}
	for _, c := range []struct{ subj, sid, sender string }{
		{wire.PartitionSubject(2, sid, "alice"), sid, "alice"},
		{wire.PartitionSubject(2, sid, wire.NodeSender), sid, wire.NodeSender},
		{wire.PartitionSubject(2, sid, wire.AnonymousSender), sid, wire.AnonymousSender},
		{wire.PartitionSubject(2, sid, ""), sid, ""},
		{wire.PartitionSubject(2, sid, "$alice"), sid, "$alice"},
		{wire.PartitionSubject(2, "acme."+sid, "alice"), "acme." + sid, "alice"},
		{wire.PartitionSubject(2, "acme."+sid, wire.NodeSender), "acme." + sid, wire.NodeSender},
	} {
		got, sender, ok := wire.InputOfSubject(c.subj)
		if !ok || got != c.sid || sender != c.sender {
			t.Errorf("InputOfSubject(%q) = %q, %q, %v", c.subj, got, sender, ok)
		}
		if s := wire.SessionFromSubject(c.subj); s != c.sid {
			t.Errorf("session of %q: %q", c.subj, s)
		}
	}
	for _, subj := range []string{"tah.in.1", "tah.in.1.a.b.c.d", "tah.evt.1.x"} {
		if _, _, ok := wire.InputOfSubject(subj); ok {
			t.Errorf("InputOfSubject(%q) took it", subj)
		}
	}
	for _, c := range []struct{ sid, sender, want string }{
		{sid, "alice", "tah.sess." + sid + ".in.by.alice"},
		{sid, "", "tah.sess." + sid + ".in"},
		{sid, wire.AnonymousSender, "tah.sess." + sid + ".in.by.$anon"},
		{sid, wire.NodeSender, "tah.sess." + sid + ".in.by.$node"},
		{sid, "$alice", "tah.sess." + sid + ".in.by.$alice"},
		{"acme." + sid, "alice", "tah.sess.acme." + sid + ".in.alice"},
	} {
		if got := wire.InputSubject(c.sid, c.sender); got != c.want {
			t.Errorf("InputSubject(%q, %q) = %q, want %q", c.sid, c.sender, got, c.want)
		}
	}
	for subj, want := range map[string]string{
		wire.NamedAPISubject(wire.EndpointApprove, "alice"):              "alice",
		wire.TenantAPISubject("acme", "bob", wire.EndpointCancel):        "bob",
		wire.APISubject(wire.EndpointApprove):                            "",
		"tah.api.approve.by.$node":                                       "",
		"tah.api.approve.by.alice.x":                                     "",
		"tah.api.approve.from.alice":                                     "",
		wire.NamedAPISubjectsOf("alice"):                                 "",
		wire.APIPrefix + wire.NamedAPIEndpointSubject(wire.EndpointDeny): "",
	} {
		if got, ok := wire.APISender(subj); got != want || ok != (want != "") {
			t.Errorf("APISender(%q) = %q, %v", subj, got, ok)
		}
	}
	for token, want := range map[string]string{"$alice": "alice", "$UABC": "UABC", wire.NodeSender: "", wire.AnonymousSender: "", "alice": "", "$": "", "$a.b": ""} {
		if got, ok := wire.AttestedSender(token); got != want || ok != (want != "") {
			t.Errorf("AttestedSender(%q) = %q, %v", token, got, ok)
		}
	}
	if s := wire.SessionFromSubject(wire.ShardSubject(3, "acme."+sid)); s != "acme."+sid {
		t.Errorf("session of a tenant's shard subject: %q", s)
	}
	if s := wire.SessionFromSubject("foo.bar"); s != "" {
		t.Errorf("session of a foreign subject: %q", s)
	}
	for subj, want := range map[string]string{"tah.tool.shout": "shout", "tah.tool.cancel.x": "", "tah.tool.a.b": "", "tah.api.get": ""} {
		if got := wire.ToolFromSubject(subj); got != want {
			t.Errorf("ToolFromSubject(%q) = %q, want %q", subj, got, want)
		}
	}
}

// TestShard pins the shard function: FNV-1a 32 of the session id, modulo the
// shard count, the same for every client in any language.
func TestShard(t *testing.T) {
	// FNV-1a 32 of "a" is 0xe40c292c, of "" 0x811c9dc5 (the offset basis).
	for sid, want := range map[string]int{"s_4f2k9q1w7e3r5t6y8v0b": 1, "a": 0xe40c292c % 8, "": 0x811c9dc5 % 8} {
		if got := wire.Shard(sid, 8); got != want {
			t.Errorf("Shard(%q, 8) = %d, want %d", sid, got, want)
		}
	}
	if wire.Shard("x", 0) != 0 {
		t.Fatal("no shards")
	}
	// A tenant's session: the hash of its tokens without the '.', as the
	// server's {{partition(n,1,2)}} computes it over two wildcards.
	if got, want := wire.Shard("acme.s_1", 8), wire.Shard("acmes_1", 8); got != want {
		t.Errorf("Shard of a tenant's session = %d, want the hash of its tokens joined, %d", got, want)
	}
}

// TestPartition pins the hash: the server's subject transform computes the
// same (bus's tests check that against a real server).
func TestPartition(t *testing.T) {
	if p := wire.Partition("s_4f2k9q1w7e3r5t6y8v0b", 16); p < 0 || p >= 16 {
		t.Fatalf("partition out of range: %d", p)
	}
	if wire.Partition("x", 0) != 0 {
		t.Fatal("no partitions")
	}
	seen := map[int]bool{}
	for i := range 200 {
		seen[wire.Partition(strings.Repeat("s", i%7)+string(rune('a'+i%26))+strings.Repeat("_", i/26), 16)] = true
	}
	if len(seen) < 12 {
		t.Fatalf("200 ids fall in %d of 16 partitions", len(seen))
	}
}

func TestTokens(t *testing.T) {
	for id, want := range map[string]string{
		"call_abc-123": "call_abc-123",
		"a.b":          "=YS5i",
		"with space":   "=d2l0aCBzcGFjZQ",
		"*":            "=Kg",
		"":             "=",
		"ünï":          "=w7xuw68",
	} {
		if got := wire.Token(id); got != want {
			t.Errorf("Token(%q) = %q, want %q", id, got, want)
		}
	}
	if k := wire.ResultKey("echo", "", "c.1"); k != "echo._.=Yy4x" {
		t.Errorf("key %q", k)
	}
	if k := wire.ResultKey("echo", "s_1", "call_1"); k != "echo.s_1.call_1" {
		t.Errorf("key %q", k)
	}
}

func TestToolCodes(t *testing.T) {
	for _, code := range []string{event.CodeInvalidInput, event.CodeUnknownTool, event.CodeTimeout, event.CodeCancelled, event.CodeToolError, event.CodeToolUnavailable} {
		if got := wire.ToolCodeOf(wire.ToolErrorStatus(code)); got != code {
			t.Errorf("%s -> %s -> %s", code, wire.ToolErrorStatus(code), got)
		}
	}
	for status, want := range map[string]string{"504": event.CodeTimeout, "418": event.CodeToolError, event.CodeInterrupted: event.CodeInterrupted} {
		if got := wire.ToolCodeOf(status); got != want {
			t.Errorf("ToolCodeOf(%s) = %s, want %s", status, got, want)
		}
	}
	if wire.RemoteRunner("tah-tool-shout") != "remote:tah-tool-shout" {
		t.Fatal("remote runner")
	}
}

func TestVersions(t *testing.T) {
	if wire.APIVersion != "2.0.0" || wire.ProtocolString != "2" {
		t.Fatalf("API %s, protocol %s", wire.APIVersion, wire.ProtocolString)
	}
	seen := map[string]bool{}
	for _, s := range wire.Schemas() {
		if seen[s.File] {
			t.Errorf("schema file %s twice", s.File)
		}
		seen[s.File] = true
	}
}

func TestOutcomeEnded(t *testing.T) {
	if !(wire.Outcome{Status: "completed"}).Ended() || (wire.Outcome{Status: "running"}).Ended() ||
		(wire.Outcome{Status: "idle", Failure: "x"}).Ended() {
		t.Fatal("Ended")
	}
}
