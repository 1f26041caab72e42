package toolservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

var quiet = slog.New(slog.DiscardHandler)

func echo() tools.Tool {
	return tools.Func(tools.Spec{Name: "echo", Description: "Echoes its input.", Idempotent: true, Timeout: 5 * time.Second},
		func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
			info, _ := tools.CallFrom(ctx)
			return tools.Text(info.Session + ":" + info.ID + ":" + string(in)), nil
		})
}

func hold() tools.Tool {
	return tools.Func(tools.Spec{Name: "hold"}, func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
}

// TestWireContract speaks the protocol by hand, as a client in another language
// would, against a Go service.
func TestWireContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := bustest.Server(t)
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, echo(), hold())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	nc := bustest.Connect(t, srv)

	// Discovery metadata.
	infos := svc.Info()
	if len(infos) != 2 || infos[0].Name != "tah-tool-echo" || infos[0].Metadata[wire.MetaToolProtocol] != wire.ProtocolString {
		t.Fatalf("info: %+v", infos)
	}
	ep := infos[0].Endpoints[0]
	if ep.Subject != "tah.tool.echo" || ep.QueueGroup != "tah-tools" || ep.Metadata["description"] != "Echoes its input." ||
		ep.Metadata["schema"] != `{"type":"object"}` || ep.Metadata["idempotent"] != "true" || ep.Metadata["exclusive"] != "false" || ep.Metadata["timeout_ms"] != "5000" {
		t.Fatalf("endpoint: %+v", ep)
	}

	// A request with the call id and session in headers only.
	msg := nats.NewMsg("tah.tool.echo")
	msg.Header.Set("Tah-Call-Id", "c1")
	msg.Header.Set("Tah-Session", "s_raw")
	msg.Data = []byte(`{"input":{"a":1}}`)
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var res tools.Result
	if err := json.Unmarshal(reply.Data, &res); err != nil || res.Output != `s_raw:c1:{"a":1}` || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("reply %s %v", reply.Data, err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "tah_tool_results")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "echo.s_raw.c1")
	if err != nil {
		t.Fatal(err)
	}
	var st wire.StoredCall
	if err := json.Unmarshal(e.Value(), &st); err != nil || st.State != "done" || st.Result.Output != res.Output || st.Instance != infos[0].ID {
		t.Fatalf("stored %s %v", e.Value(), err)
	}

	// Malformed requests get micro error headers.
	for body, want := range map[string]string{`{`: "malformed request", `{"input":{}}`: "call_id is missing"} {
		reply, err := nc.Request("tah.tool.echo", []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if reply.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(reply.Header.Get(micro.ErrorHeader), want) {
			t.Errorf("%s: %v", body, reply.Header)
		}
	}

	// A cancel for another session does not touch the call; one for its session does.
	inbox := nc.NewInbox()
	replies := make(chan *nats.Msg, 1)
	sub, _ := nc.ChanSubscribe(inbox, replies)
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("tah.tool.hold", inbox, []byte(`{"call_id":"c2","session":"s_a","input":{}}`)); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 20*time.Second, "c2 running", func() bool {
		e, err := kv.Get(ctx, "hold.s_a.c2")
		return err == nil && json.Unmarshal(e.Value(), &st) == nil && st.State == "running"
	})
	_ = nc.Publish("tah.tool.cancel.c2", []byte(`{"call_id":"c2","session":"s_other"}`))
	_ = nc.Publish("tah.tool.cancel.c2", []byte(`{"call_id":"c2","session":"s_a","reason":"cancelled"}`))
	select {
	case m := <-replies:
		if m.Header.Get(micro.ErrorCodeHeader) != "499" {
			t.Fatalf("cancelled reply: %v %s", m.Header, m.Data)
		}
		if err := json.Unmarshal(m.Data, &res); err != nil || res.Code != event.CodeCancelled {
			t.Fatalf("cancelled body: %s", m.Data)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reply to the cancelled call")
	}
}

// A cancel that overtakes its request (here: the request waits for the only
// slot) still cancels it.
func TestCancelOvertakesRequest(t *testing.T) {
	// Every wait below is on an event (a stored state, a reply); the
	// deadline only keeps a broken build from hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := bustest.Server(t)
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, MaxConcurrent: 1}, hold())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	nc := bustest.Connect(t, srv)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "tah_tool_results")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := kv.Watch(ctx, "hold._.c1")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Stop()
	replies := make(chan *nats.Msg, 2)
	inbox := nc.NewInbox()
	sub, _ := nc.ChanSubscribe(inbox, replies)
	defer sub.Unsubscribe()
	// c1 takes the slot.
	_ = nc.PublishRequest("tah.tool.hold", inbox, []byte(`{"call_id":"c1","attempt":"a1","input":{}}`))
	for running := false; !running; {
		select {
		case e := <-c1.Updates():
			var st wire.StoredCall
			running = e != nil && json.Unmarshal(e.Value(), &st) == nil && st.State == "running"
		case <-ctx.Done():
			t.Fatal("c1 never ran")
		}
	}
	// c2 is cancelled before it can start, then c1 is cancelled: c2 never runs.
	_ = nc.Publish("tah.tool.cancel.c2", []byte(`{"call_id":"c2","attempt":"a2","reason":"cancelled"}`))
	_ = nc.PublishRequest("tah.tool.hold", inbox, []byte(`{"call_id":"c2","attempt":"a2","input":{}}`))
	_ = nc.Flush()
	_ = nc.Publish("tah.tool.cancel.c1", []byte(`{"call_id":"c1","attempt":"a1"}`))
	for range 2 {
		select {
		case m := <-replies:
			if m.Header.Get(micro.ErrorCodeHeader) != "499" {
				t.Fatalf("reply: %v %s", m.Header, m.Data)
			}
		case <-ctx.Done():
			t.Fatal("a cancelled call did not answer")
		}
	}
	var st wire.StoredCall
	if e, err := kv.Get(ctx, "hold._.c2"); err == nil {
		_ = json.Unmarshal(e.Value(), &st)
	}
	if st.State != "done" || st.Result.Code != event.CodeCancelled {
		t.Fatalf("c2: %+v", st)
	}
}

func TestStartErrorsAndServe(t *testing.T) {
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := toolservice.Start(ctx, nc, toolservice.Config{}, echo(), echo()); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("duplicate tools: %v", err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- toolservice.Serve(sctx, nc, echo()) }()
	bustest.Eventually(t, 20*time.Second, "echo served", func() bool {
		_, err := nc.Request("tah.tool.echo", []byte(`{"call_id":"x","input":{}}`), time.Second)
		return err == nil
	})
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	// Without JetStream there is nowhere to store results: Start refuses.
	plain := bustest.ServerWith(t, func(o *server.Options) { o.JetStream = false })
	if _, err := toolservice.Start(ctx, bustest.Connect(t, plain), toolservice.Config{}, echo()); err == nil {
		t.Error("started without JetStream")
	}
}
