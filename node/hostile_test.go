package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// hostile is a one-node cluster and a client of it, for the attacks below.
type hostile struct {
	t  *testing.T
	c  *tahtest.Cluster
	cl *client.Client
	nc *nats.Conn // the client's own connection, for raw messages
}

const testInputLimit = 2000

func startHostile(t *testing.T) *hostile {
	c := tahtest.Start(t, tahtest.Options{Nodes: 1, Pace: time.Millisecond,
		EditNode: func(_ int, o *node.Options) { o.MaxInputBytes = testInputLimit }})
	nc := c.Connect()
	// A deadline for a hang only: a list of sessions with megabytes of
	// labels took over ten seconds (the default) beside CPU hogs.
	cl, err := client.New(nc, client.Options{RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &hostile{t: t, c: c, cl: cl, nc: nc}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run runs a turn of the mock's demo in sid and returns its outcome, or the
// error of a command the node refused.
func (h *hostile) run(sid, text string) (wire.Outcome, error) {
	h.t.Helper()
	ctx := ctxFor(h.t)
	turn, err := h.cl.Run(ctx, sid, wire.Input{Text: text})
	if err != nil {
		return wire.Outcome{}, err
	}
	defer turn.Close()
	return turn.Outcome(ctx)
}

func (h *hostile) completes(sid string) {
	h.t.Helper()
	if out, err := h.run(sid, "what is in this project?"); err != nil || out.Status != projection.StatusCompleted {
		h.t.Fatalf("%s: a turn ended %+v, %v; want completed", sid, out, err)
	}
}

func (h *hostile) create(sids ...string) {
	h.t.Helper()
	for _, sid := range sids {
		if _, err := h.cl.Create(ctxFor(h.t), wire.CreateRequest{Session: sid}); err != nil {
			h.t.Fatalf("create %s: %v", sid, err)
		}
	}
}

// publishRecord stores body in sid's shard of the log as the node's own
// credential can: the log's permissions do not stop this writer.
func (h *hostile) publishRecord(sid string, body []byte) uint64 {
	h.t.Helper()
	b := h.c.Node(0).Bus()
	js, err := jetstream.New(b.Conn())
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := js.Publish(ctxFor(h.t), wire.ShardSubject(b.ShardOf(sid), sid), body)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// faulted waits until the read model shows sid's fault, and returns it.
func (h *hostile) faulted(sid string, status projection.Status) *projection.Fault {
	h.t.Helper()
	var got wire.SessionSummary
	err := natstest.Poll(30*time.Second, 50*time.Millisecond, func() error {
		var err error
		if got, err = h.cl.Get(ctxFor(h.t), sid); err != nil {
			return err
		}
		if got.Fault == nil || got.Status != status {
			return fmt.Errorf("%s is %s, fault %+v; want %s", sid, got.Status, got.Fault, status)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return got.Fault
}

// Nothing in one session's log stops the node: a record that is not JSON,
// an event that no owner wrote and a record of a newer schema each put only
// their own session out of service, visibly; the API, new sessions and the
// other sessions go on, and a fork repairs a failed session.
func TestALogCannotBrickTheNode(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	h.create("s_ok", "s_bad", "s_forged", "s_gap", "s_newer")
	for _, sid := range []string{"s_ok", "s_bad", "s_forged", "s_gap", "s_newer"} {
		h.completes(sid)
	}

	badSeq := h.publishRecord("s_bad", []byte(`{"v":2,"session":"s_bad","events":[{"type":"turn.started","data":`))
	newerSeq := h.publishRecord("s_newer", []byte(`{"v":99,"session":"s_newer","time":"2026-12-01T00:00:00Z","events":[{"type":"x","data":{}}]}`))
	b := h.c.Node(0).Bus()
	last, err := b.LastSeq(ctxFor(t), "s_forged")
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Writer("s_forged", 0, last) // a writer that never claimed it
	if err != nil {
		t.Fatal(err)
	}
	forged, err := w.Append(ctxFor(t), event.MustNew("s_forged", event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User("forged")}))
	if err != nil {
		t.Fatal(err)
	}

	// A turn.started that skips turn numbers, written at the owner's epoch
	// (as a node of a buggy version would): turn 1 ran, this says turn 3.
	evs, err := h.c.Log("s_gap")
	if err != nil {
		t.Fatal(err)
	}
	var st projection.State
	if f := projection.FoldLog(&st, evs); f != nil || st.Turn != 1 {
		t.Fatalf("s_gap before: turn %d, %v", st.Turn, f)
	}
	if w, err = b.Writer("s_gap", st.Epoch, st.LastSeq); err != nil {
		t.Fatal(err)
	}
	gap, err := w.Append(ctxFor(t), event.MustNew("s_gap", event.TurnStarted, event.TurnStartedData{Turn: 3, Message: llm.User("skipped")}))
	if err != nil {
		t.Fatal(err)
	}

	for sid, seq := range map[string]uint64{"s_bad": badSeq, "s_forged": forged[0], "s_gap": gap[0]} {
		_, err := h.run(sid, "again")
		var ce *client.CommandError
		if !errors.Is(err, client.ErrCorruptLog) || !errors.As(err, &ce) || ce.Code != wire.CodeCorruptLog {
			t.Fatalf("%s: an input to a corrupt session: %v; want %s", sid, err, wire.CodeCorruptLog)
		}
		f := h.faulted(sid, projection.StatusFailed)
		if f.Code != projection.FaultCorruptLog || f.Seq != seq {
			t.Fatalf("%s: fault %+v, want %s at %d", sid, f, projection.FaultCorruptLog, seq)
		}
	}
	if f := h.faulted("s_forged", projection.StatusFailed); f.Type != event.TurnStarted || !strings.Contains(f.Reason, "no owner") {
		t.Fatalf("the forged event's fault: %+v", f)
	}
	if f := h.faulted("s_gap", projection.StatusFailed); f.Type != event.TurnStarted || !strings.Contains(f.Reason, "does not follow turn 1") {
		t.Fatalf("the turn gap's fault: %+v", f)
	}
	if f := h.faulted("s_newer", projection.StatusNeedsNewerNode); f.Code != projection.FaultNeedsNewerNode || f.Seq != newerSeq {
		t.Fatalf("the newer record's fault: %+v", f)
	}

	h.completes("s_ok")
	h.create("s_after")
	h.completes("s_after")
	if r, err := h.cl.List(ctxFor(t), wire.ListRequest{Status: projection.StatusFailed}); err != nil || len(r.Sessions) != 3 {
		t.Fatalf("the failed sessions: %+v, %v; want s_bad, s_forged and s_gap", r.Sessions, err)
	}

	// The repair: a fork holds the turns before the fault, and runs.
	fixed, err := h.cl.Fork(ctxFor(t), wire.ForkRequest{Session: "s_bad"})
	if err != nil {
		t.Fatal(err)
	}
	h.completes(fixed.Session)
}

// A Tah-Reply-To outside the client's inbox (here: the session's own log)
// is refused on .err, and nothing is published there; an input over the
// node's limit is refused too. The session goes on.
func TestHostileInputsAreRefused(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	h.create("s_in")
	h.completes("s_in")

	errs, err := h.nc.SubscribeSync(wire.ErrorSubject("s_in"))
	if err != nil {
		t.Fatal(err)
	}
	target := wire.ShardSubject(h.c.Node(0).Bus().ShardOf("s_in"), "s_in")
	m := nats.NewMsg(wire.InputSubject("s_in", ""))
	m.Data = []byte(`{"id":"in_hostile","input":"hi"}`)
	m.Header.Set(wire.HeaderCommand, string(wire.CommandRun))
	m.Header.Set(wire.HeaderMsgID, "in_hostile")
	m.Header.Set(wire.HeaderReplyTo, target)
	js, err := jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctxFor(t), m); err != nil {
		t.Fatal(err)
	}
	msg, err := errs.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), `"failure_code":"`+wire.CodeReplySubject+`"`) || msg.Header.Get(wire.HeaderInputID) != "in_hostile" {
		t.Fatalf("input error: %s %v", msg.Data, msg.Header)
	}

	_, err = h.run("s_in", strings.Repeat("a", testInputLimit+1))
	var ce *client.CommandError
	if !errors.Is(err, client.ErrPayloadTooLarge) || !errors.As(err, &ce) || ce.Code != wire.CodeInputTooLarge ||
		!strings.Contains(ce.Message, "max_input_bytes") {
		t.Fatalf("an input over the limit: %v", err)
	}

	h.completes("s_in")
	rep := h.c.Audit("s_in") // a message published onto the log would not read as a record
	if len(rep.Problems) > 0 || len(rep.Turns) != 2 {
		t.Fatalf("%s\n%s", rep.Problems, rep.Dump())
	}
}

// An API request whose reply subject is the session's own log gets no
// answer there: the node answers only inboxes. The session goes on.
func TestHostileAPIReplySubject(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	h.create("s_api")
	h.completes("s_api")
	target := wire.ShardSubject(h.c.Node(0).Bus().ShardOf("s_api"), "s_api")
	for _, ep := range []string{wire.EndpointStatus, wire.EndpointGet, wire.EndpointList} {
		if err := h.nc.PublishRequest(wire.APISubject(ep), target, []byte(`{"session":"s_api"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.nc.Request(wire.APISubject(wire.EndpointStatus), nil, 10*time.Second); err != nil {
		t.Fatal(err) // answered after the three above: they were handled
	}
	h.completes("s_api")
	rep := h.c.Audit("s_api")
	if len(rep.Problems) > 0 || len(rep.Turns) != 2 {
		t.Fatalf("%s\n%s", rep.Problems, rep.Dump())
	}
}
