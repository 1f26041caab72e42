package client_test

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestInputsNameTheirSender: a client credential's inputs name it
// (tah.sess.<sid>.in.by.<name>), and so do its API commands
// (tah.api.<endpoint>.by.<name>): turn.started and budget.set record it; a
// credential issued before (its JWT allows only tah.sess.*.in and the
// unnamed endpoints) still runs turns and commands, with the forms that
// name none, and no sender is recorded (a decision keeps the body's by).
func TestInputsNameTheirSender(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	admin := connect(t, n)
	trust, err := auth.Load(n.Bus().Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	current, err := auth.RoleUser(wire.RoleClient, "carol", nil)
	if err != nil {
		t.Fatal(err)
	}
	older := olderClient(t, "oscar")
	// As issued before: no named commands either.
	allow := slices.DeleteFunc(older.Permissions.Pub.Allow, func(s string) bool { return s == wire.NamedAPISubjectsOf("oscar") })
	older.Permissions.Pub.Allow = allow
	older.Permissions.Pub.Deny = slices.DeleteFunc(older.Permissions.Pub.Deny, func(s string) bool {
		return slices.ContainsFunc(wire.CommandEndpoints(), func(e string) bool { return s == wire.APISubject(e) })
	})
	for who, u := range map[string]auth.User{"carol": current, "": older} {
		issued, err := trust.Issue(u)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), u.Name+".creds")
		if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := client.Connect(ctx, client.Options{URL: n.Bus().ClientURL(), CredsFile: path})
		if err != nil {
			t.Fatal(err)
		}
		sid := newSession(t, admin)
		if o := run(t, c, sid, "hello"); o.Status != "completed" {
			t.Fatalf("%s: %+v", u.Name, o)
		}
		// A command through the API names it too (tah.api.budget.by.carol),
		// whatever the body says.
		tokens := int64(5000)
		outcome, err := c.Conn().SubscribeSync(c.Conn().NewRespInbox())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Command(ctx, wire.CommandBudget, wire.CommandRequest{Session: sid, ReplyTo: outcome.Subject, Decision: &wire.Decision{By: "mallory"},
			Budget: &wire.BudgetChange{Session: &wire.LimitsChange{Tokens: &tokens}}}); err != nil {
			t.Fatalf("%s: budget through the API: %v", u.Name, err)
		}
		if _, err := outcome.NextMsg(time.Minute); err != nil { // the budget set: its outcome
			t.Fatalf("%s: no outcome of the budget: %v", u.Name, err)
		}
		c.Close()
		evs, err := admin.Events(ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		by, budgetBy := "(none)", "(none)"
		for _, ev := range evs.Events {
			var d struct {
				By string `json:"by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			switch ev.Type {
			case event.TurnStarted:
				by = d.By
			case event.BudgetSet:
				budgetBy = d.By
			}
		}
		if by != who {
			t.Errorf("%s: turn.started by %q, want %q", u.Name, by, who)
		}
		if want := cmp.Or(who, "mallory"); budgetBy != want {
			t.Errorf("%s: budget.set by %q, want %q", u.Name, budgetBy, want)
		}
	}
}

// TestAnonymousInputsGoStraightToTheirPartition: a client that names
// wire.AnonymousSender publishes on tah.sess.<sid>.in.by.$anon, which TAH_IN
// stores at once (TAH_TIN stores nothing: one durable write, no source's
// hop), and no sender is recorded; a client over a connection of the
// caller's given no Sender keeps the form that names nobody,
// tah.sess.<sid>.in, through TAH_TIN, which a user whose permissions allow
// only that form (a credential issued before inputs named their sender)
// may publish.
func TestAnonymousInputsGoStraightToTheirPartition(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	admin := connect(t, n)
	trust, err := auth.Load(n.Bus().Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	// tah.sess.*.in, and not tah.sess.*.in.by.$anon.
	issued, err := trust.Issue(olderClient(t, "olga"))
	if err != nil {
		t.Fatal(err)
	}
	olderCreds := filepath.Join(t.TempDir(), "olga.creds")
	if err := os.WriteFile(olderCreds, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(admin.Conn())
	if err != nil {
		t.Fatal(err)
	}
	tin, err := js.Stream(ctx, wire.TenantInputStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		conn       []nats.Option // none: the node's own connection
		opts       client.Options
		throughTIN uint64 // inputs TAH_TIN stores a turn
	}{
		{"the node's connection, wire.AnonymousSender", nil, client.Options{Sender: wire.AnonymousSender}, 0},
		{"an older credential's connection, no Sender", []nats.Option{nats.UserCredentials(olderCreds), nats.CustomInboxPrefix(wire.CredentialInbox("olga"))}, client.Options{}, 1},
	} {
		nc := n.Bus().Conn()
		if c.conn != nil {
			if nc, err = nats.Connect(n.Bus().ClientURL(), c.conn...); err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
		}
		cl, err := client.New(nc, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		sid := newSession(t, admin)
		before, err := tin.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o := run(t, cl, sid, "hello"); o.Status != "completed" {
			t.Fatalf("%s: %+v", c.name, o)
		}
		after, err := tin.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := after.State.LastSeq - before.State.LastSeq; got != c.throughTIN {
			t.Errorf("%s: TAH_TIN stored %d inputs of the turn, want %d", c.name, got, c.throughTIN)
		}
		cl.Close()
		evs, err := admin.Events(ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Events {
			if ev.Type != event.TurnStarted {
				continue
			}
			var d struct {
				By string `json:"by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			if d.By != "" {
				t.Errorf("%s: turn.started by %q, want none", c.name, d.By)
			}
		}
	}
}

// olderClient is a client credential named name as issued before inputs
// named their sender: its inputs may name nobody (tah.sess.*.in) and
// nothing else.
func olderClient(t *testing.T, name string) auth.User {
	t.Helper()
	u, err := auth.RoleUser(wire.RoleClient, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(u.Permissions.Pub.Allow, wire.NamedInputSubjectsOf(name))
	if i < 0 {
		t.Fatalf("a client's permissions do not name its inputs: %v", u.Permissions.Pub.Allow)
	}
	u.Permissions.Pub.Allow[i] = wire.InputSubjects
	return u
}
