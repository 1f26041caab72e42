package remote_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// A tool whose service replies to a discovery after the others have gone
// quiet (a loaded machine) stays listed, and so does one whose service does
// not reply at all within the discovery's wait: slow is not gone. A service
// that is gone (the server says no one listens) is dropped.
func TestSlowToolServiceIsNotGone(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	fast, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, goTools(make(chan struct{}))[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fast.Close(context.Background()) })

	// slowpoke's service: its info as a real one gives it, then answered
	// by a subscriber that takes its time.
	nc := bustest.Connect(t, srv)
	real, err := toolservice.Start(ctx, nc, toolservice.Config{Logger: quiet},
		tools.Func(tools.Spec{Name: "slowpoke"}, func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil }))
	if err != nil {
		t.Fatal(err)
	}
	infoSubject, err := micro.ControlSubject(micro.InfoVerb, wire.ToolServicePrefix+"slowpoke", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := nc.Request(infoSubject, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	info := reply.Data
	if err := real.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var delay atomic.Int64 // < 0: never reply
	answer := func(m *nats.Msg) {
		d := time.Duration(delay.Load())
		if d < 0 {
			return
		}
		go func() {
			time.Sleep(d)
			_ = m.Respond(info)
		}()
	}
	allSubject, _ := micro.ControlSubject(micro.InfoVerb, "", "")
	slow, err := nc.Subscribe(infoSubject, answer)
	if err != nil {
		t.Fatal(err)
	}
	slowAll, err := nc.Subscribe(allSubject, answer)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	reg := openRegistry(t, srv) // DiscoveryQuiet 50 ms, DiscoveryWait 1 s
	discover(t, reg, "shout", "slowpoke")
	listed := func() bool {
		t.Helper()
		if err := reg.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		_, ok := reg.Tool("slowpoke")
		return ok
	}

	delay.Store(int64(300 * time.Millisecond)) // after shout's service, and its quiet period
	for range 3 {
		if !listed() {
			t.Fatal("slowpoke dropped: its service replied after the others went quiet")
		}
	}
	delay.Store(-1) // no reply within the discovery's wait
	if !listed() {
		t.Fatal("slowpoke dropped: its service did not reply in time, but nothing says it is gone")
	}
	if err := slow.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := slowAll.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "slowpoke, gone, dropped", func() bool { return !listed() })
	if _, ok := reg.Tool("shout"); !ok {
		t.Fatal("shout dropped")
	}
}
