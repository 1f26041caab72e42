package client_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// TestTenantSession drives a session of tenant acme (id acme.s_…) through a
// real node beside one of the default tenant: created with its tenant, its
// inputs through TAH_TIN (naming their sender) into their partition, its
// records in the log, a fork and a fired schedule that stay in the tenant.
func TestTenantSession(t *testing.T) {
	n := startNode(t, newGated())
	c := connect(t, n)
	ctx := ctxT(t)

	created, err := c.Create(ctx, wire.CreateRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Session
	if !strings.HasPrefix(sid, "acme.s_") {
		t.Fatalf("a fresh id of tenant acme: %q", sid)
	}
	// The default tenant's session named like the tenant lives beside it.
	if _, err := c.Create(ctx, wire.CreateRequest{Session: "acme"}); err != nil {
		t.Fatal(err)
	}
	if o := run(t, c, sid, "hello"); o.Status != projection.StatusCompleted || o.Content != "answer to hello" {
		t.Fatalf("the tenant's turn: %+v", o)
	}
	if o := run(t, c, "acme", "plain"); o.Status != projection.StatusCompleted || o.Content != "answer to plain" {
		t.Fatalf("the default tenant's turn: %+v", o)
	}

	// The input went through TAH_TIN under its sender's name.
	js, err := jetstream.New(n.Bus().Conn())
	if err != nil {
		t.Fatal(err)
	}
	tin, err := js.Stream(ctx, wire.TenantInputStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tin.GetLastMsgForSubject(ctx, wire.TenantInputSubjects)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Subject, "tah.sess."+sid+".in.") || strings.HasSuffix(m.Subject, "."+wire.AnonymousSender) {
		t.Fatalf("the tenant's input was stored on %s: want tah.sess.%s.in.<the admin credential's name>", m.Subject, sid)
	}

	summary, err := c.Get(ctx, sid)
	if err != nil || summary.ID != sid {
		t.Fatalf("get %s: %+v, %v", sid, summary, err)
	}
	f, err := c.Fork(ctx, wire.ForkRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.Session, "acme.s_") {
		t.Fatalf("a fork of %s left its tenant: %s", sid, f.Session)
	}
	if o := run(t, c, f.Session, "again"); o.Status != projection.StatusCompleted {
		t.Fatalf("the fork's turn: %+v", o)
	}

	// A fired schedule reaches the tenant's session (TAH_SCHED's fires are
	// routed to its partition with the node as sender).
	fol, err := c.Follow(ctx, sid, summary.LastSeq+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fol.Close)
	if _, err := c.Schedule(ctx, wire.ScheduleRequest{Session: sid, Name: "soon", At: time.Now().Add(2 * time.Second), Text: "scheduled"}); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		select {
		case ev, ok := <-fol.Events():
			if !ok {
				t.Fatalf("the follower of %s stopped", sid)
			}
			done = ev.Type == event.AgentFinished
		case <-ctx.Done():
			t.Fatalf("the scheduled turn of %s never completed", sid)
		}
	}

	for _, bad := range []wire.CreateRequest{
		{Tenant: "Acme"},
		{Tenant: "acme", Session: "beta.s_1"},
		{Tenant: "acme", Session: "s_1"},
		{Session: "acme.s_1.x"},
	} {
		_, err := c.Create(ctx, bad)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) && !errors.Is(err, event.ErrInvalidSessionID) {
			t.Errorf("create %+v: %v, want a refusal", bad, err)
		}
	}
}

// TestTenantDecisionNamesItsSender: an approve of a tenant's session, and of
// the default tenant's, records as who decided the name of the credential
// that sent it (its subject's sender, pinned by the server), not the by
// its body claims.
func TestTenantDecisionNamesItsSender(t *testing.T) {
	ctx := ctxT(t)
	reg, err := tools.NewRegistry(tools.Func(tools.Spec{Name: "write"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Result{Output: "written"}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	p := mock.Scripted(mock.CallTool("write", `{}`).OnPrompt("plan of acme"), mock.CallTool("write", `{}`).OnPrompt("plan of nobody"),
		mock.Say("done").Always())
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: p, Tools: reg, Logger: slog.New(slog.DiscardHandler),
		Approval: session.ApprovalPolicy{Rules: map[string]string{"write": session.ApprovalAlways}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	c := connect(t, n) // the data directory's admin credential, named "admin"
	for tenant, want := range map[string]string{"acme": "admin", "": "admin"} {
		created, err := c.Create(ctx, wire.CreateRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		sid := created.Session
		if o := run(t, c, sid, "plan of "+cmp.Or(tenant, "nobody")); !o.AwaitsApproval() {
			t.Fatalf("%s: the turn: %+v", sid, o)
		}
		turn, err := c.Approve(ctx, sid, wire.Decision{By: "somebody else"})
		if err != nil {
			t.Fatal(err)
		}
		if o, err := turn.Outcome(ctx); err != nil || o.Status != projection.StatusCompleted {
			t.Fatalf("%s: approved: %+v %v", sid, o, err)
		}
		turn.Close()
		evs, err := c.Events(ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs.Events {
			if ev.Type != event.ToolApproved {
				continue
			}
			d, err := ev.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if by := d.(*event.ToolApprovedData).By; by != want {
				t.Fatalf("%s: approved by %q, want %q", sid, by, want)
			}
			found = true
		}
		if !found {
			t.Fatalf("%s: no tool.approved", sid)
		}
	}
}

// TestTenantFollowerAcrossAReconnect: a Follower of a tenant's credential,
// which follows the session's live feed and reads the rest through the
// tenant's API, loses its connection (the server closes it) while a turn
// runs, and still delivers every record of the session once, in order, to
// the turn's end.
func TestTenantFollowerAcrossAReconnect(t *testing.T) {
	n := startNode(t, newGated())
	admin := connect(t, n)
	ctx := ctxT(t)
	states := make(chan client.ConnEvent, 16)
	c, sid, next := tenantFollowing(ctx, t, n, func(o *client.Options) { o.OnConnection = func(e client.ConnEvent) { states <- e } }, nil)
	if ev := next(); ev.Type != event.SessionCreated {
		t.Fatalf("first: %s", ev.Type)
	}
	id, err := c.Conn().GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Bus().Server().DisconnectClientByID(id); err != nil {
		t.Fatal(err)
	}
	if e := <-states; e != client.Disconnected {
		t.Fatalf("state %s", e)
	}
	if o := run(t, admin, sid, "while away"); o.Status != projection.StatusCompleted {
		t.Fatalf("the turn: %+v", o)
	}
	if e := <-states; e != client.Reconnected {
		t.Fatalf("state %s", e)
	}
	last := uint64(1)
	var types []event.Type
	for ev := next(); ; ev = next() {
		if ev.Seq < last {
			t.Fatalf("%s at %d after %d", ev.Type, ev.Seq, last)
		}
		last = ev.Seq
		types = append(types, ev.Type)
		if ev.Type == event.AgentFinished {
			break
		}
	}
	all, err := admin.Events(ctx, wire.EventsRequest{Session: sid, FromSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) != len(types) {
		t.Fatalf("delivered %v, the log has %d events after the first", types, len(all.Events))
	}
}
