package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// inbox collects delivered inputs; it acks them unless told otherwise.
type inbox struct {
	mu   sync.Mutex
	msgs []*InputMsg
	ack  bool
}

func (ib *inbox) handle(ctx context.Context, m *InputMsg) {
	ib.mu.Lock()
	ib.msgs = append(ib.msgs, m)
	ib.mu.Unlock()
	if ib.ack {
		_ = m.Ack(ctx)
	}
}

func (ib *inbox) get() []*InputMsg {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return append([]*InputMsg(nil), ib.msgs...)
}

func (ib *inbox) len() int { return len(ib.get()) }

func TestInputRoundTrip(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	ib := &inbox{ack: true}
	c, err := b.ConsumeInputs(ctxT(t), ib.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	const sid = "s_in"
	id, err := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandRun, Text: "hello", Options: &wire.RunOptions{MaxSteps: 3}})
	if err != nil {
		t.Fatal(err)
	}
	msg := llm.User("with a message")
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{ID: "in_2", Command: wire.CommandRun, Message: &msg}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{ID: "in_3", Command: wire.CommandCancel, Reason: "enough", ReplyTo: "_INBOX.abc.1"}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "three inputs delivered", func() bool { return ib.len() == 3 })
	got := ib.get()
	if got[0].ID != id || got[0].Command != wire.CommandRun || got[0].UserMessage().Content != "hello" || got[0].Options.MaxSteps != 3 {
		t.Errorf("first: %+v", got[0].Input)
	}
	if got[1].ID != "in_2" || got[1].UserMessage().Content != "with a message" {
		t.Errorf("second: %+v", got[1].Input)
	}
	if got[2].Command != wire.CommandCancel || got[2].Reason != "enough" || got[2].ReplyTo != "_INBOX.abc.1" || got[0].ReplyTo != "" {
		t.Errorf("third: %+v", got[2].Input)
	}
	for _, m := range got {
		if m.Session != sid || m.Partition != wire.Partition(sid, b.cfg.Partitions) || m.Delivered != 1 || m.Seq == 0 {
			t.Errorf("envelope: %+v", m)
		}
	}
	// Acked inputs leave the work queue.
	bustest.Eventually(t, 30*time.Second, "TAH_IN empty", func() bool {
		si, err := b.in.Info(ctxT(t))
		return err == nil && si.State.Msgs == 0
	})
	// Publishing the same id again within the duplicate window stores nothing.
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{ID: "in_2", Command: wire.CommandRun, Message: &msg}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{ID: "in_4", Command: wire.CommandResume}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "resume delivered", func() bool { return ib.len() == 4 })
	if got := ib.get()[3]; got.ID != "in_4" {
		t.Fatalf("a duplicate was delivered: %+v", got.Input)
	}
}

// TestInputIDsAreSessionScoped: an input id is unique within its session.
// The same id in two sessions is two inputs, both delivered (TAH_IN
// de-duplicates across the whole stream by Nats-Msg-Id, which carries the
// session); an input without a body id takes the id its Nats-Msg-Id names,
// "<sid>:<id>" or a bare id as older clients send.
func TestInputIDsAreSessionScoped(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	ib := &inbox{ack: true}
	c, err := b.ConsumeInputs(ctxT(t), ib.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for _, sid := range []string{"s_one", "s_two"} {
		if _, err := b.PublishInput(ctxT(t), sid, wire.Input{ID: "in_same", Command: wire.CommandResume}); err != nil {
			t.Fatal(err)
		}
	}
	// Inputs as a client of the protocol writes them, without a body id.
	for _, msgID := range []string{"s_one:in_scoped", "in_bare", "s_two:in_named"} {
		m := nats.NewMsg(wire.InputSubject("s_one", ""))
		m.Header.Set(wire.HeaderCommand, string(wire.CommandResume))
		m.Header.Set(wire.HeaderMsgID, msgID)
		if _, err := b.js.PublishMsg(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, 30*time.Second, "five inputs delivered", func() bool { return ib.len() == 5 })
	var got []string
	for _, m := range ib.get() {
		got = append(got, m.Session+"/"+m.ID)
	}
	// A Nats-Msg-Id that names another session is taken whole. The two
	// sessions' partitions are consumed apart: their order is not told.
	slices.Sort(got)
	if want := "s_one/in_bare s_one/in_same s_one/in_scoped s_one/s_two:in_named s_two/in_same"; strings.Join(got, " ") != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}

func TestPartitionMatchesServerTransform(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Partitions = 7 })
	for i := range 40 {
		sid := fmt.Sprintf("s_p%d", i)
		if _, err := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandResume}); err != nil {
			t.Fatal(err)
		}
		m, err := b.in.GetLastMsgForSubject(ctxT(t), "tah.in.*."+sid+".*")
		if err != nil {
			t.Fatal(err)
		}
		if want := wire.PartitionSubject(wire.Partition(sid, 7), sid, wire.NodeSender); m.Subject != want {
			t.Fatalf("%s stored as %s, Partition says %s", sid, m.Subject, want)
		}
		// One that names no sender, through TAH_TIN and TAH_IN's source of
		// it: the same partition.
		u := nats.NewMsg(wire.InputSubject(sid, ""))
		u.Header.Set(wire.HeaderCommand, string(wire.CommandResume))
		u.Header.Set(wire.HeaderMsgID, sid+":unnamed")
		if _, err := b.js.PublishMsg(ctxT(t), u); err != nil {
			t.Fatal(err)
		}
		bustest.Eventually(t, 30*time.Second, "the unnamed input sourced", func() bool {
			m, err := b.in.GetLastMsgForSubject(ctxT(t), "tah.in.*."+sid)
			return err == nil && m.Subject == wire.PartitionSubject(wire.Partition(sid, 7), sid, "")
		})
	}
}

// TestMalformedInputIsTerminated publishes inputs that are not valid, by raw
// NATS as a client in another language could: each is terminated, reported on
// the session's error subject, and the valid input behind it in the same
// partition still flows.
func TestMalformedInputIsTerminated(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Partitions = 1 }) // everything in one partition
	const sid = "s_bad"
	var errsMu sync.Mutex
	var reported []wire.Outcome
	sub, err := b.SubscribeErrors(ctxT(t), sid, func(ie wire.Outcome) {
		errsMu.Lock()
		reported = append(reported, ie)
		errsMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	ib := &inbox{ack: true}
	c, err := b.ConsumeInputs(ctxT(t), ib.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	replies, err := b.nc.SubscribeSync("_INBOX.bad")
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := b.nc.SubscribeSync("tah.api.get") // no client owns it
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	raw := func(cmd, body string) {
		t.Helper()
		m := nats.NewMsg(wire.InputSubject(sid, ""))
		sent++
		m.Header.Set(wire.HeaderMsgID, fmt.Sprintf("raw-%d", sent))
		if cmd != "" {
			m.Header.Set(wire.HeaderCommand, cmd)
		}
		switch cmd {
		case "fly":
			m.Header.Set(wire.HeaderReplyTo, "_INBOX.bad")
		case "resume":
			m.Header.Set(wire.HeaderReplyTo, hostile.Subject)
		}
		m.Data = []byte(body)
		if _, err := b.js.PublishMsg(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	raw("run", `{"input": `)                           // not JSON
	raw("", `{"input":"no command"}`)                  // no header
	raw("fly", `{}`)                                   // unknown command
	raw("run", `{"id":"in_x"}`)                        // run without input
	raw("cancel", `{"input":"cancel takes no input"}`) // input on cancel
	raw("resume", `{"id":"in_hostile"}`)               // a reply subject outside the inboxes
	raw("run", `{"input":"ok","id":"in_ok"}`)          // valid, behind the bad ones

	bustest.Eventually(t, 30*time.Second, "valid input delivered", func() bool { return ib.len() == 1 })
	if got := ib.get()[0]; got.ID != "in_ok" || got.Text != "ok" {
		t.Fatalf("delivered %+v", got.Input)
	}
	bustest.Eventually(t, 30*time.Second, "six errors reported", func() bool {
		errsMu.Lock()
		defer errsMu.Unlock()
		return len(reported) == 6
	})
	errsMu.Lock()
	for i, ie := range reported {
		want := wire.CodeMalformedInput
		if i == 5 {
			want = wire.CodeReplySubject
		}
		if ie.FailureCode != want || ie.Session != sid || ie.Status != wire.StatusRefused || ie.Failure == "" {
			t.Errorf("report: %+v", ie)
		}
	}
	// The id is the body's, else Nats-Msg-Id's, even of a body that is not JSON.
	if reported[0].InputID != "raw-1" || reported[3].InputID != "in_x" || !strings.Contains(reported[2].Failure, "fly") {
		t.Errorf("reports: %+v", reported)
	}
	errsMu.Unlock()
	// The input that named a reply subject gets its report there too.
	rm, err := replies.NextMsg(30 * time.Second)
	if err != nil || !strings.Contains(string(rm.Data), `"status":"refused"`) || !strings.Contains(string(rm.Data), `"failure_code":"malformed_input"`) {
		t.Fatalf("reply: %v %s", err, rm.Data)
	}
	// Nothing is published on the subject no client owns (the valid input,
	// handled after it, was delivered above).
	if n, _, _ := hostile.Pending(); n != 0 {
		t.Fatalf("%d messages published on %s", n, hostile.Subject)
	}
	bustest.Eventually(t, 30*time.Second, "TAH_IN empty", func() bool {
		si, err := b.in.Info(ctxT(t))
		return err == nil && si.State.Msgs == 0
	})
	// PublishInput refuses the same mistakes before they are sent.
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandRun}); !errors.Is(err, ErrMalformedInput) {
		t.Fatalf("PublishInput of an empty run: %v", err)
	}
}

// TestRejectReportsToTheSender: a rejected input's refusal is published on
// the session's error subject and on its reply subject, the same body.
func TestRejectReportsToTheSender(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	const sid = "s_rej"
	got := make(chan wire.Outcome, 1)
	sub, _ := b.SubscribeErrors(ctxT(t), sid, func(ie wire.Outcome) { got <- ie })
	defer sub.Stop()
	replies, err := b.nc.SubscribeSync("_INBOX.rej")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := b.ConsumeInputs(ctxT(t), func(ctx context.Context, m *InputMsg) {
		_ = m.Reject(ctx, "unknown_session", errors.New("no such session"))
	})
	defer c.Stop()
	id, _ := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandResume, ReplyTo: "_INBOX.rej"})
	want := wire.Refusal(sid, id, "unknown_session", "no such session")
	select {
	case ie := <-got:
		if !reflect.DeepEqual(ie, want) {
			t.Fatalf("report %+v", ie)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no error report")
	}
	rm, err := replies.NextMsg(30 * time.Second)
	var o wire.Outcome
	if err != nil || json.Unmarshal(rm.Data, &o) != nil || !reflect.DeepEqual(o, want) {
		t.Fatalf("reply %v %s", err, rm.Data)
	}
}

// TestKeepAliveAndRedelivery: an input kept alive is not redelivered while its
// work runs past the ack wait; an input whose owner goes away without acking
// is delivered again, to the node that now pulls its partition.
func TestKeepAliveAndRedelivery(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) {
		c.Partitions = 1
		c.InputAckWait = 2 * time.Second
		c.InputPinnedTTL = 3 * time.Second
	})
	const sid = "s_long"
	first := &inbox{}
	c1, err := b.ConsumeInputs(ctxT(t), first.handle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandResume}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "delivered", func() bool { return first.len() == 1 })
	m := first.get()[0]
	stop := m.KeepAlive(250 * time.Millisecond)
	// The property is about time: let two ack waits pass (this waits for no
	// event), then the server must still count the input as pending with its
	// first owner and never have redelivered it.
	time.Sleep(2 * b.cfg.InputAckWait)
	cons, err := b.in.Consumer(ctxT(t), wire.PartitionConsumer(0))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumRedelivered != 0 || ci.NumAckPending != 1 || first.len() != 1 {
		t.Fatalf("kept-alive input redelivered: %d redelivered, %d pending, %d deliveries", ci.NumRedelivered, ci.NumAckPending, first.len())
	}
	stop()
	// The owner goes away without acking; another node takes the partition
	// over and gets the input again.
	if err := c1.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	second := &inbox{ack: true}
	other := connected(t, b.ClientURL(), func(c *Config) {
		c.Partitions, c.InputAckWait, c.InputPinnedTTL = 1, b.cfg.InputAckWait, b.cfg.InputPinnedTTL
		c.CredsFile = auth.NodeCredsPath(b.cfg.DataDir)
	})
	c2, err := other.ConsumeInputs(ctxT(t), second.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	bustest.Eventually(t, 30*time.Second, "redelivered to the new owner", func() bool { return second.len() == 1 })
	if got := second.get()[0]; got.Seq != m.Seq || got.Delivered < 2 {
		t.Fatalf("redelivery %+v", got)
	}
}

// TestTakeOverDeliversADeadOwnersInputsAgain: a node that takes over the
// partition of a node taken for dead gets the inputs that node held
// unacknowledged at once, long before their ack wait or the dead node's pin
// would let them go, each counted as delivered again: whether the server
// still pins the partition to the dead node or to no one (the pin goes when
// the consumer's leader changes). A pin given after the death is left alone,
// and so is a partition this node pulls.
func TestTakeOverDeliversADeadOwnersInputsAgain(t *testing.T) {
	t.Parallel()
	for name, unpinned := range map[string]bool{"pinned to the dead": false, "pinned to no one": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := bustest.Server(t)
			edit := func(c *Config) {
				// Far beyond the test's patience: only the takeover moves the input.
				c.Partitions, c.InputAckWait, c.InputPinnedTTL = 1, 10*time.Minute, 10*time.Minute
			}
			dead, heir := connected(t, srv.ClientURL(), edit), connected(t, srv.ClientURL(), edit)
			held := &inbox{}
			c1, err := dead.ConsumeInputs(ctxT(t), held.handle)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"in_1", "in_2"} {
				if _, err := dead.PublishInput(ctxT(t), "s_heir", wire.Input{ID: id, Command: wire.CommandRun, Text: "x"}); err != nil {
					t.Fatal(err)
				}
			}
			bustest.Eventually(t, 30*time.Second, "the owner holds both inputs", func() bool { return held.len() == 2 })
			if err := held.get()[0].Ack(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			pinnedBefore := time.Now()
			// The owner dies: its pulls stop, it unpins nothing, acks nothing
			// more, and its connections close. Stopped only, its pull request
			// could outlive the reset on the server (nats.go unsubscribes a
			// stopped pull in the background) and take in_2 again: CI.
			c1.Stop()
			if err := dead.Close(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if unpinned {
				if err := heir.in.UnpinConsumer(ctxT(t), wire.PartitionConsumer(0), wire.InputGroup); err != nil {
					t.Fatal(err)
				}
			}

			got := &inbox{ack: true}
			c2, err := heir.NewInputConsumer(got.handle)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Stop()
			if !unpinned {
				// A death older than the pin: the pin is a live node's.
				if n, err := c2.TakeOver(ctxT(t), 0, pinnedBefore.Add(-time.Hour)); err != nil || n != 0 {
					t.Fatalf("take over of a partition pinned after the death: %d inputs, %v; want 0, nil", n, err)
				}
			}
			if n, err := c2.TakeOver(ctxT(t), 0, time.Now()); err != nil || n != 1 {
				t.Fatalf("take over: %d inputs, %v; want 1, nil", n, err)
			}
			if err := c2.Add(ctxT(t), 0); err != nil {
				t.Fatal(err)
			}
			bustest.Eventually(t, 30*time.Second, "in_2 delivered to the heir", func() bool { return got.len() == 1 })
			if m := got.get()[0]; m.ID != "in_2" || m.Delivered < 2 {
				t.Fatalf("after the takeover: %s delivered %d times, want in_2 delivered again", m.ID, m.Delivered)
			}
			if _, err := heir.PublishInput(ctxT(t), "s_heir", wire.Input{ID: "in_3", Command: wire.CommandRun, Text: "x"}); err != nil {
				t.Fatal(err)
			}
			bustest.Eventually(t, 30*time.Second, "in_3 delivered", func() bool { return got.len() == 2 })
			if m := got.get()[1]; m.ID != "in_3" || m.Delivered != 1 {
				t.Fatalf("next input: %s delivered %d times, want in_3 delivered once", m.ID, m.Delivered)
			}
			// Pulled here, pinned to this consumer: nothing to take over.
			if n, err := c2.TakeOver(ctxT(t), 0, time.Now()); err != nil || n != 0 {
				t.Fatalf("take over of a partition pulled here: %d inputs, %v; want 0, nil", n, err)
			}
			if got.len() != 2 {
				t.Fatalf("%d deliveries after a take over of a partition pulled here, want 2", got.len())
			}
		})
	}
}

// TestPinnedPartitions: with two nodes pulling, each partition's inputs all go
// to one of them.
func TestPinnedPartitions(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	edit := func(c *Config) { c.Partitions = 4 }
	n1, n2 := connected(t, srv.ClientURL(), edit), connected(t, srv.ClientURL(), edit)
	ib1, ib2 := &inbox{ack: true}, &inbox{ack: true}
	c1, err := n1.ConsumeInputs(ctxT(t), ib1.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Stop()
	c2, err := n2.ConsumeInputs(ctxT(t), ib2.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	const total = 60
	for i := range total {
		if _, err := n1.PublishInput(ctxT(t), fmt.Sprintf("s_pin%d", i), wire.Input{Command: wire.CommandResume}); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, 30*time.Second, "all delivered", func() bool { return ib1.len()+ib2.len() == total })
	owner := map[int]string{}
	for name, ib := range map[string]*inbox{"n1": ib1, "n2": ib2} {
		for _, m := range ib.get() {
			if o, ok := owner[m.Partition]; ok && o != name {
				t.Fatalf("partition %d delivered to both nodes", m.Partition)
			}
			owner[m.Partition] = name
		}
	}
}

// TestInputsNotAcknowledgedOutliveARestart: after a restart of the embedded
// server the inputs not acknowledged are delivered again, those
// acknowledged never (the work queue let them go).
func TestInputsNotAcknowledgedOutliveARestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.InputAckWait = time.Second // in_2's redelivery after the restart
	b := open(t, cfg)
	held := &inbox{}
	c, err := b.ConsumeInputs(ctxT(t), held.handle)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"in_1", "in_2"} {
		if _, err := b.PublishInput(ctxT(t), "s_x", wire.Input{ID: id, Command: wire.CommandRun, Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, 30*time.Second, "both delivered", func() bool { return held.len() == 2 })
	if err := held.get()[0].Ack(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	b = open(t, cfg)
	got := &inbox{ack: true}
	c, err = b.ConsumeInputs(ctxT(t), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := b.PublishInput(ctxT(t), "s_x", wire.Input{ID: "in_3", Command: wire.CommandRun, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	// in_2 comes again once its ack wait runs out (the consumer's state
	// outlived the restart) or at once (it did not); in_1 is gone.
	bustest.Eventually(t, 30*time.Second, "in_2 and in_3 delivered", func() bool { return got.len() == 2 })
	var ids []string
	for _, m := range got.get() {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"in_2", "in_3"}) {
		t.Fatalf("delivered after the restart: %v, want in_2 (not acknowledged) and in_3", ids)
	}
	bustest.Eventually(t, 30*time.Second, "TAH_IN empty", func() bool {
		si, err := b.in.Info(ctxT(t))
		return err == nil && si.State.Msgs == 0
	})
}

// TestInputConsumerMadeAgain: a partition's consumer deleted while it is
// pulled, or lost with its JetStream (a memory consumer of a server of its
// own, after the restart a full disk brings), is made again by the node
// pulling it: the input held then (not acknowledged) comes again, the next
// ones come, none is lost.
func TestInputConsumerMadeAgain(t *testing.T) {
	t.Parallel()
	for name, lose := range map[string]func(t *testing.T, b *Bus){
		"deleted": func(t *testing.T, b *Bus) {
			if err := b.in.DeleteConsumer(ctxT(t), wire.PartitionConsumer(0)); err != nil {
				t.Fatal(err)
			}
		},
		"JetStream restarted": func(t *testing.T, b *Bus) {
			if err := b.watch.restart(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Partitions = 1
			b := open(t, cfg)
			got := &inbox{}
			c, err := b.ConsumeInputs(ctxT(t), got.handle)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			publish := func(id string) {
				t.Helper()
				if _, err := b.PublishInput(ctxT(t), "s_x", wire.Input{ID: id, Command: wire.CommandRun, Text: "x"}); err != nil {
					t.Fatal(err)
				}
			}
			publish("in_1")
			publish("in_2")
			bustest.Eventually(t, 30*time.Second, "in_1 and in_2 delivered", func() bool { return got.len() == 2 })
			if err := got.get()[0].Ack(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			lose(t, b) // in_2 held, not acknowledged
			publish("in_3")
			ids := func() []string {
				var out []string
				for _, m := range got.get()[2:] {
					if !slices.Contains(out, m.ID) {
						out = append(out, m.ID)
					}
				}
				slices.Sort(out)
				return out
			}
			bustest.Eventually(t, 60*time.Second, "in_2 again and in_3", func() bool { return slices.Equal(ids(), []string{"in_2", "in_3"}) })
			for _, m := range got.get()[2:] {
				if err := m.Ack(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			bustest.Eventually(t, 30*time.Second, "TAH_IN empty", func() bool {
				si, err := b.in.Info(ctxT(t))
				return err == nil && si.State.Msgs == 0
			})
		})
	}
}

// TestInputConsumerGoneWithoutSetup: a node that sets nothing up (its
// operator does) does not make a deleted consumer again, and pulls it again
// once the setup has.
func TestInputConsumerGoneWithoutSetup(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Partitions = 1 })
	var logged struct {
		sync.Mutex
		strings.Builder
	}
	worker := connected(t, b.ClientURL(), func(c *Config) {
		c.NoSetup, c.Partitions, c.CredsFile = true, 1, auth.NodeCredsPath(b.cfg.DataDir)
		c.Logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			logged.Lock()
			defer logged.Unlock()
			return logged.Write(p)
		}), nil))
	})
	got := &inbox{ack: true}
	c, err := worker.ConsumeInputs(ctxT(t), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := b.in.DeleteConsumer(ctxT(t), wire.PartitionConsumer(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishInput(ctxT(t), "s_x", wire.Input{ID: "in_1", Command: wire.CommandRun, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	// The worker's heal looks, and says it cannot make the consumer: it
	// stays gone.
	bustest.Eventually(t, 30*time.Second, "the worker says the consumer is gone", func() bool {
		logged.Lock()
		defer logged.Unlock()
		return strings.Contains(logged.String(), "run the setup")
	})
	if _, err := b.in.Consumer(ctxT(t), wire.PartitionConsumer(0)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the consumer was made again by a node that sets nothing up: %v", err)
	}
	if err := b.ensureInputConsumers(ctxT(t), map[string]bool{}); err != nil { // the operator's setup
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "in_1 delivered to the worker", func() bool { return got.len() == 1 })
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Only servers of 2.14 and later reset consumers; a version not understood
// is taken for an older one (only the unpin is made).
func TestHasConsumerReset(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"2.15.3": true, "2.14.0": true, "3.0.0": true, "2.14.0-RC.1": true,
		"2.13.9": false, "2.10.22": false, "1.4.1": false, "": false, "dev": false,
	} {
		if got := hasConsumerReset(v); got != want {
			t.Errorf("hasConsumerReset(%q) = %v, want %v", v, got, want)
		}
	}
}
