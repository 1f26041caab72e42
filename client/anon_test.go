package client_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// TestAnonymousClientRefusedItsFormTakesTheOther: a client connected
// without a credential to a NATS server whose user without a password may
// publish the inputs that name nobody only on tah.sess.<sid>.in (its
// permissions written by hand from an older protocol) is refused
// tah.sess.<sid>.in.by.$anon, publishes on the older form instead, and
// keeps to it: its turns run.
func TestAnonymousClientRefusedItsFormTakesTheOther(t *testing.T) {
	ctx := ctxT(t)
	srv := natstest.StartWith(t, 1, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "tah", Password: "node"},
			{Username: "anon", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{wire.InputSubjects, "$JS.API.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", wire.ErrorSubjects}},
			}},
		}
		o.NoAuthUser = "anon"
		o.Cluster = server.ClusterOpts{}
		o.Routes = nil
	})
	cfg := bus.Default()
	cfg.URL, cfg.Partitions = strings.Replace(srv.URLs(), "nats://", "nats://tah:node@", 1), 2
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: mock.Scripted(mock.Say("hi").Always()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(ctx) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	owner, err := client.New(n.Bus().Conn(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: srv.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for turn := range 2 {
		sid := newSession(t, owner)
		if o := run(t, c, sid, "hello"); o.Status != "completed" {
			t.Fatalf("turn %d: %+v", turn, o)
		}
	}
}
