package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// TestTenantTools: a tenant's tool service (toolservice.Config.Tenant) is
// discovered as that tenant's alone: its Tenant view lists and calls it,
// the registry's own catalog (every tenant's) and another tenant's view
// do not, nor does its key in the registry; its calls are stored under the
// tenant's key without binding the bucket, found by call id, and cancelled
// on the tenant's cancel subject; a call waiting for it through the view
// finds it when it comes, and one of every tenant's tools of the same name
// is the registry's, not the tenant's.
func TestTenantTools(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	js, err := jetstream.New(bustest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, Tenant: "acme"}, says("shout", "acme")); err == nil {
		t.Fatal("a tenant's service started without the bucket of stored calls, which it cannot make")
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.ToolResultBucket, History: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, Tenant: "Acme"}, says("shout", "x")); err == nil {
		t.Fatal("a service of tenant Acme started")
	}
	release := make(chan struct{})
	defer close(release)
	hold := holds("hold", release)
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, Tenant: "acme"}, says("shout", "acme"), hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	if infos := svc.Info(); infos[1].Name != "tah-ttool-acme__shout" || infos[1].Endpoints[0].Subject != "tah.ttool.acme.shout" {
		t.Fatalf("services: %+v", infos)
	}
	reg := openRegistry(t, srv)
	acme, beta := reg.Tenant("acme"), reg.Tenant("beta")
	bustest.Eventually(t, 30*time.Second, "acme's shout discovered", func() bool {
		_ = reg.Refresh(ctx)
		_, ok := acme.Tool("shout")
		return ok
	})
	for what, cat := range map[string]tools.Catalog{"every tenant's": reg, "beta's": beta} {
		if _, ok := cat.Tool("shout"); ok || len(cat.Schemas()) != 0 {
			t.Errorf("%s catalog lists acme's tools: %v", what, cat.Schemas())
		}
	}
	if _, ok := reg.Tool("acme/shout"); ok {
		t.Error("acme's tool is reached by its key")
	}
	if s := acme.Schemas(); len(s) != 2 || s[0].Name != "hold" || s[1].Name != "shout" {
		t.Errorf("acme's schemas: %+v", s)
	}

	exec := tools.NewExecutor(acme, tools.Options{Logger: quiet})
	sid := "acme.s_1"
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: sid})
	if res := exec.Execute(sctx, llm.ToolCall{ID: "call_1", Name: "shout"}); res.IsError || res.Output != "acme" {
		t.Fatalf("acme's shout: %+v", res)
	}
	st, err := reg.Lookup(ctx, sid, "call_1")
	if err != nil || st.State != wire.CallDone || st.Service != "tah-ttool-acme__shout" || st.Result.Output != "acme" {
		t.Fatalf("stored: %+v %v", st, err)
	}
	kv, err := js.KeyValue(ctx, wire.ToolResultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, wire.TenantResultKey("acme", "shout", sid, "call_1")); err != nil {
		t.Fatalf("the call is not stored under acme's key: %v", err)
	}
	cctx, cancel := context.WithCancel(sctx)
	done := make(chan tools.Result, 1)
	go func() { done <- exec.Execute(cctx, llm.ToolCall{ID: "call_hold", Name: "hold"}) }()
	stateOf(t, reg, sid, "call_hold", wire.CallRunning)
	cancel()
	if res := <-done; res.Code != event.CodeCancelled {
		t.Fatalf("cancelled: %+v", res)
	}
	if st := stateOf(t, reg, sid, "call_hold", wire.CallDone); st.Result.Code != event.CodeCancelled {
		t.Fatalf("the service did not hear the cancel: %+v", st.Result)
	}

	// A call of beta's waits for beta's own tool, which comes.
	waited := make(chan error, 1)
	go func() { waited <- beta.WaitFor(ctx, "later") }()
	later, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, Tenant: "beta"}, says("later", "beta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = later.Close(context.Background()) })
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if _, ok := beta.Tool("later"); !ok {
		t.Fatal("beta's later is not beta's")
	}
	if _, ok := acme.Tool("later"); ok {
		t.Fatal("beta's later is acme's")
	}
}
