package tah_test

import (
	"errors"
	"strings"
	"testing"

	tah "github.com/tah-dev/tah"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
)

// TestTenantThroughTheGoAPI: CreateOptions.Tenant makes a session of that
// tenant (acme.s_…), which runs as any other; a name that cannot be a
// tenant's is ErrBadRequest.
func TestTenantThroughTheGoAPI(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("hello from acme"))}.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	s, err := sessions.CreateWith(ctx, tah.CreateOptions{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.ID(), "acme.s_") {
		t.Fatalf("a session of tenant acme: %q", s.ID())
	}
	r, err := s.Run(ctx, "hi")
	if err != nil || r.State != tah.StateCompleted || r.Content != "hello from acme" {
		t.Fatalf("run: %+v %v", r, err)
	}
	if again, err := sessions.Get(ctx, s.ID()); err != nil || again.ID() != s.ID() {
		t.Fatalf("get %s: %v", s.ID(), err)
	}
	if _, err := sessions.CreateWith(ctx, tah.CreateOptions{Tenant: "Not A Tenant"}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("a bad tenant's name: %v", err)
	}
}
