package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/wire"
)

// TestKilledTurnStaysInItsTrace: three tah-node processes export their
// traces to a receiver in this process; a turn sent with a client's
// traceparent is answering when its node is killed with SIGKILL. The
// survivor that resumes it works in the same trace: its invoke_agent span is
// the child of the turn's span that turn.started recorded (the victim's, in
// the client's trace, itself the child of the client's span; the victim died
// before exporting it), it carries a tah.turn.continued event naming both
// nodes and why, and the resumed LLM call's span is its child.
func TestKilledTurnStaysInItsTrace(t *testing.T) {
	rcv := oteltest.Start(t)
	// The nodes inherit this process's environment: their spans go out soon
	// after they end, not at the default 5 s batch.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := newCluster(t, tahtest.Options{Pace: 60 * time.Millisecond, InputAckWait: 5 * time.Second,
		EditConfig: func(_ int, cfg *config.Config) {
			cfg.Tracing.Enabled, cfg.Tracing.Endpoint = true, rcv.HTTPURL
		}})
	cl := newClient(t, c)
	sid := cl.create()

	cctx, clientSpan := sdktrace.NewTracerProvider().Tracer("clustertest").Start(context.Background(), "client asks")
	clientSpan.End()
	err := natstest.Poll(60*time.Second, 300*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(cctx, 10*time.Second)
		defer cancel()
		_, err := c.Bus().PublishInput(ctx, sid, wire.Input{ID: "in_traced", Command: wire.CommandRun, Text: "what is in this project?"})
		if errors.Is(err, wire.ErrMalformedInput) {
			return natstest.Permanent(err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Kill its node while the model writes the answer (the tools are done).
	var victim string
	err = natstest.Poll(60*time.Second, 200*time.Millisecond, func() error {
		rep := c.Audit(sid)
		if r, ok := rep.Running(); ok && r.Answering {
			victim = rep.Owner()
			return nil
		}
		return fmt.Errorf("the turn is not answering yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing %s mid-answer", victim)
	c.Kill(c.Index(victim))

	traceID := clientSpan.SpanContext().TraceID().String()
	var resumed oteltest.Span
	spans := rcv.Wait(t, func(spans []oteltest.Span) bool {
		for _, s := range oteltest.Named(spans, "invoke_agent tah") {
			if s.TraceID == traceID && s.Attrs["tah.node"] != victim && s.Attrs["tah.turn.status"] == "completed" {
				resumed = s
				return true
			}
		}
		return false
	})

	// The span the turn recorded: in the client's trace, the victim's.
	rep := c.Audit(sid)
	if len(rep.Turns) != 1 || !rep.InputEnded("in_traced") {
		t.Fatalf("the turn did not end once:\n%s", rep.Dump())
	}
	started, err := event.DecodeAs[event.TurnStartedData](rep.Turns[0].Start)
	if err != nil || started.Trace == nil {
		t.Fatalf("turn.started records no trace: %+v %v", started, err)
	}
	// traceparent: 00-<trace id>-<span id>-<flags>
	parts := strings.Split(started.Trace.Traceparent, "-")
	if len(parts) != 4 || parts[1] != traceID || parts[2] == clientSpan.SpanContext().SpanID().String() {
		t.Fatalf("turn.started's trace %q is not a span in the client's trace %s", started.Trace.Traceparent, traceID)
	}
	if resumed.ParentSpanID != parts[2] {
		t.Errorf("the resumed work's parent is %s, want the recorded turn span %s", resumed.ParentSpanID, parts[2])
	}
	// Why: the survivor took the victim's partitions over and resumed its
	// open turns ("resume"), or the input came back to it first.
	continued := false
	for _, e := range resumed.Events {
		why := e.Attrs["tah.reason"]
		if e.Name == "tah.turn.continued" && e.Attrs["tah.node"] == resumed.Attrs["tah.node"] && e.Attrs["tah.previous_node"] == victim &&
			(why == string(wire.CommandResume) || why == "an open turn left by a previous owner") {
			continued = true
		}
	}
	if !continued {
		t.Errorf("no tah.turn.continued event naming %s, the victim %s and why: %+v", resumed.Attrs["tah.node"], victim, resumed.Events)
	}
	chat := false
	for _, s := range spans {
		if s.TraceID == traceID && s.ParentSpanID == resumed.SpanID && strings.HasPrefix(s.Name, "chat") {
			chat = true
		}
	}
	if !chat {
		t.Errorf("no chat span under the resumed work")
	}
}
