package client_test

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	older, err := auth.RoleUser(wire.RoleClient, "oscar", nil)
	if err != nil {
		t.Fatal(err)
	}
	allow := older.Permissions.Pub.Allow
	i := slices.Index(allow, wire.NamedInputSubjectsOf("oscar"))
	if i < 0 {
		t.Fatalf("a client's permissions do not name its inputs: %v", allow)
	}
	allow[i] = wire.InputSubjects // as issued before: no named inputs nor commands
	allow = slices.DeleteFunc(allow, func(s string) bool { return s == wire.NamedAPISubjectsOf("oscar") })
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
