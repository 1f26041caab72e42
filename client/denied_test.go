package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestRefusedPublishesFailAtOnce: an observer's credential may read but
// not create sessions nor send inputs. NATS drops such a publish and says so
// only on the connection (a permissions violation): the Client turns it
// into ErrPermissionDenied at once, rather than waiting for an answer that
// never comes until its deadline (which would be ErrUnavailable).
func TestRefusedPublishesFailAtOnce(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	admin := connect(t, n)
	sid := newSession(t, admin)
	path := observerCreds(t, admin, "olive")
	// The deadlines are long enough that only the violation can end the
	// calls in time for ctx.
	obs, err := client.Connect(ctx, client.Options{URL: n.Bus().ClientURL(), CredsFile: path, RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	if _, err := obs.Get(ctx, sid); err != nil {
		t.Fatalf("an observer reads: %v", err)
	}
	createAndRunRefused(ctx, t, obs, sid)
	if _, err := obs.Cancel(ctx, sid, "no"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("an observer's cancel: %v", err)
	}
	// The connection stays usable.
	if _, err := obs.Get(ctx, sid); err != nil {
		t.Fatalf("a read after the refusals: %v", err)
	}
}

// TestRefusedPublishesFailAtOnceOverTheCallersConnection: the same for
// Clients made by New over a connection of the caller's: the refusals end
// their operations at once, and still reach the caller's own error handler;
// two Clients of one connection share the watch, and one's Close leaves the
// other's.
func TestRefusedPublishesFailAtOnceOverTheCallersConnection(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("hi").Always()))
	admin := connect(t, n)
	sid := newSession(t, admin)
	path := observerCreds(t, admin, "oscar")
	var mu sync.Mutex
	var seen []error // what the caller's own handler got
	nc, err := nats.Connect(n.Bus().ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox("oscar")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, err)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	first, err := client.New(nc, client.Options{RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := client.New(nc, client.Options{RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	first.Close()
	if _, err := obs.Get(ctx, sid); err != nil {
		t.Fatalf("an observer reads: %v", err)
	}
	createAndRunRefused(ctx, t, obs, sid)
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 || !errors.Is(seen[0], nats.ErrPermissionViolation) {
		t.Fatalf("the caller's handler got %d errors (%v), want the two refusals", len(seen), seen)
	}
}

// observerCreds issues an observer's credential named name and returns the
// path of its .creds file.
func observerCreds(t *testing.T, admin *client.Client, name string) string {
	t.Helper()
	creds, _, err := admin.IssueCreds(ctxT(t), name, wire.RoleObserver, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// createAndRunRefused checks that obs, an observer's Client, may neither
// create a session nor run a turn of sid: each ends with
// ErrPermissionDenied, naming the subject refused.
func createAndRunRefused(ctx context.Context, t *testing.T, obs *client.Client, sid string) {
	t.Helper()
	if _, err := obs.Create(ctx, wire.CreateRequest{}); !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), wire.APISubject(wire.EndpointCreate)) {
		t.Fatalf("an observer's create: %v", err)
	}
	if _, err := obs.Run(ctx, sid, wire.Input{Text: "hi"}); !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), wire.InputSubject(sid, "")) {
		t.Fatalf("an observer's run: %v", err)
	}
}
