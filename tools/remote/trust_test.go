package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/wire"
)

// securedBus is an embedded server with TAH's decentralized auth, and a
// function that connects as a tool credential serving tools.
func securedBus(t *testing.T) (*bus.Bus, func(name string, tools ...string) *nats.Conn) {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port = t.TempDir(), -1
	b, err := bus.Open(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	connect := func(name string, tools ...string) *nats.Conn {
		t.Helper()
		trust, err := auth.Load(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		u, err := auth.RoleUser(wire.RoleTool, name, tools)
		if err != nil {
			t.Fatal(err)
		}
		issued, err := trust.Issue(u)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name+".creds")
		if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(b.ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox(name)),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the violations this test makes on purpose
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	return b, connect
}

// serve adds a micro service named service with an endpoint per subject, each
// described as desc.
func serve(t *testing.T, nc *nats.Conn, service, desc string, subjects ...string) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: service, Version: "0.0.1", QueueGroup: wire.ToolQueueGroup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	for i, subj := range subjects {
		err := svc.AddEndpoint("ep"+string(rune('a'+i)), micro.HandlerFunc(func(req micro.Request) { _ = req.Respond([]byte(`{"output":"` + desc + `"}`)) }),
			micro.WithEndpointSubject(subj), micro.WithEndpointMetadata(map[string]string{wire.MetaToolDesc: desc, wire.MetaToolIdempotent: "true"}))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiscoveryTrust: a tool credential issued for "a" that advertises "b"
// (an endpoint on b's subject in its own service, and a service named after
// b) is never offered as b; b's own service is, with its own record.
func TestDiscoveryTrust(t *testing.T) {
	b, connect := securedBus(t)
	forger := connect("forger", "a")
	serve(t, forger, wire.ToolServicePrefix+"a", "a, honest", wire.ToolSubject("a"), wire.ToolSubject("b"))
	serve(t, forger, wire.ToolServicePrefix+"b", "b, forged", wire.ToolSubject("b"))

	reg, err := remote.Open(b.Conn(), remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	discover(t, reg, "a")
	if err := reg.Refresh(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if tool, ok := reg.Tool("b"); ok {
		t.Fatalf("b is offered from a's credential: %q", tool.Description())
	}
	if a, _ := reg.Tool("a"); a.Description() != "a, honest" {
		t.Fatalf("a: %q", a.Description())
	}

	serve(t, connect("owner", "b"), wire.ToolServicePrefix+"b", "b, its own", wire.ToolSubject("b"))
	discover(t, reg, "a", "b")
	for range 3 { // whatever answers first, the record is b's own
		if err := reg.Refresh(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if tool, _ := reg.Tool("b"); tool == nil || tool.Description() != "b, its own" {
			t.Fatalf("b: %+v", tool)
		}
	}
}
