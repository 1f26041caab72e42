package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	creds, _, err := admin.IssueCreds(ctx, "olive", wire.RoleObserver, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "olive.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
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
	if _, err := obs.Create(ctx, wire.CreateRequest{}); !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), wire.APISubject(wire.EndpointCreate)) {
		t.Fatalf("an observer's create: %v", err)
	}
	if _, err := obs.Run(ctx, sid, wire.Input{Text: "hi"}); !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), wire.InputSubject(sid, "")) {
		t.Fatalf("an observer's run: %v", err)
	}
	if _, err := obs.Cancel(ctx, sid, "no"); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("an observer's cancel: %v", err)
	}
	// The connection stays usable.
	if _, err := obs.Get(ctx, sid); err != nil {
		t.Fatalf("a read after the refusals: %v", err)
	}
}
