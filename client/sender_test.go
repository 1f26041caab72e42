package client_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestInputsNameTheirSender: a client credential's inputs name it
// (tah.sess.<sid>.in.by.<name>), and turn.started records it; a credential
// issued before inputs named their sender (its JWT allows only
// tah.sess.*.in) still runs turns, with the form that names none, and no
// sender is recorded.
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
	allow[i] = wire.InputSubjects // as issued before
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
		c.Close()
		evs, err := admin.Events(ctx, wire.EventsRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		by := "(none)"
		for _, ev := range evs.Events {
			if ev.Type == event.TurnStarted {
				var d struct {
					By string `json:"by"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				by = d.By
			}
		}
		if by != who {
			t.Errorf("%s: turn.started by %q, want %q", u.Name, by, who)
		}
	}
}
