package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTemporary(t *testing.T) {
	for err, want := range map[error]bool{
		context.DeadlineExceeded:                                   true,
		fmt.Errorf("publish: %w", nats.ErrTimeout):                 true,
		nats.ErrNoResponders:                                       true,
		jetstream.ErrNoStreamResponse:                              true,
		jetstream.ErrJetStreamNotEnabled:                           true,
		fmt.Errorf("registry: %w", nats.ErrJetStreamNotEnabled):    true, // nats.go's older API's form
		&nats.APIError{Code: 503, ErrorCode: 10039}:                true,
		&nats.APIError{Code: 400, ErrorCode: 10071}:                false,
		&jetstream.APIError{Code: 500, ErrorCode: 10008}:           true,
		&jetstream.APIError{Code: 503}:                             true,
		&jetstream.APIError{Code: 400, ErrorCode: 10071}:           false, // wrong last sequence: fenced
		&jetstream.APIError{Code: 409, ErrorCode: 10158}:           true,  // duplicate in process: its first try in flight
		fmt.Errorf("x: %w", &jetstream.APIError{ErrorCode: 10009}): true,
		jetstream.ErrStreamNotFound:                                false,
		nats.ErrAuthorization:                                      false,
		errors.New("anything else"):                                false,
		context.Canceled:                                           false,
	} {
		if got := natsx.Temporary(err); got != want {
			t.Errorf("Temporary(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestNewInputMsg(t *testing.T) {
	m, id, err := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{Command: wire.CommandRun, Text: "hi", ReplyTo: "_INBOX.x"}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "in_") || m.Subject != wire.InputSubject("s_1", wire.NodeSender) || m.Header.Get(wire.HeaderMsgID) != "s_1:"+id ||
		m.Header.Get(wire.HeaderCommand) != "run" || m.Header.Get(wire.HeaderReplyTo) != "_INBOX.x" ||
		string(m.Data) != `{"id":"`+id+`","input":"hi"}` {
		t.Fatalf("%s %s %v %s", id, m.Subject, m.Header, m.Data)
	}
	if m, id, _ := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{ID: "mine", Command: wire.CommandResume}, 1<<20); id != "mine" || m.Header.Get(wire.HeaderReplyTo) != "" {
		t.Fatalf("given id: %s %v", id, m.Header)
	}
	if _, _, err := natsx.NewInputMsg("a.b.c", wire.NodeSender, wire.Input{Command: wire.CommandResume}, 1<<20); !errors.Is(err, event.ErrInvalidSessionID) {
		t.Errorf("bad session id: %v", err)
	}
	if _, _, err := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{Command: wire.CommandRun}, 1<<20); !errors.Is(err, wire.ErrMalformedInput) {
		t.Errorf("run without text: %v", err)
	}
	_, _, err = natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{Command: wire.CommandRun, Text: strings.Repeat("a", 1000)}, 1000)
	if !errors.Is(err, natsx.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "max payload of 1000 bytes") {
		t.Errorf("too large: %v", err)
	}
}

// TestMsgSizeIsWhatTheServerCounts: the largest input NewInputMsg accepts
// under the server's max payload is published, and one byte more is refused
// by NATS itself.
func TestMsgSizeIsWhatTheServerCounts(t *testing.T) {
	srv := bustest.ServerWith(t, func(o *server.Options) { o.MaxPayload = 2048 })
	nc := bustest.Connect(t, srv)
	var largest *nats.Msg
	for n := 1500; n < 2100; n++ {
		m, _, err := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{ID: "in_1", Command: wire.CommandRun, Text: strings.Repeat("a", n)}, nc.MaxPayload())
		if errors.Is(err, natsx.ErrPayloadTooLarge) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		largest = m
	}
	if largest == nil || natsx.MsgSize(largest) > 2048 {
		t.Fatalf("largest accepted: %v", largest)
	}
	if err := nc.PublishMsg(largest); err != nil {
		t.Fatalf("the largest accepted input: %v", err)
	}
	largest.Data = append(largest.Data, 'a')
	if err := nc.PublishMsg(largest); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("one byte more: %v, want %v", err, nats.ErrMaxPayload)
	}
}

// TestPublishRetryingWaitsForTheStream: a publish made while no stream takes
// the subject (as while a stream elects a leader) is tried again until one
// does, and stored once; so is the same message published again.
func TestPublishRetryingWaitsForTheStream(t *testing.T) {
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{Command: wire.CommandResume}, nc.MaxPayload())
	if err != nil {
		t.Fatal(err)
	}
	// A plain subscriber on the subject sees the tries (it never acknowledges
	// them, so each times out and is tried again).
	tries, err := nc.SubscribeSync(m.Subject)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var retries atomic.Int64
	go func() {
		_, err := natsx.PublishRetrying(ctxT(t), js, m, func(error) { retries.Add(1) })
		done <- err
	}()
	if _, err := tries.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no try seen: %v", err)
	}
	tries.Unsubscribe()
	s, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "IN", Subjects: []string{wire.NamedInputSubjects}})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if retries.Load() == 0 {
		t.Fatal("the retries were not told")
	}
	if _, err := natsx.PublishRetrying(ctxT(t), js, m, nil); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(ctxT(t)); info.State.Msgs != 1 {
		t.Fatalf("stored %d times", info.State.Msgs)
	}

	// Without an id, a retry could store it twice: refused.
	if _, err := natsx.PublishRetrying(ctxT(t), js, nats.NewMsg(wire.InputSubject("s_1", "")), nil); !errors.Is(err, natsx.ErrNoMsgID) {
		t.Fatalf("no id: %v", err)
	}
	// The context ends the tries; the error says why they failed.
	m.Subject = "nothing.here"
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	if _, err := natsx.PublishRetrying(ctx, js, m, nil); !natsx.Temporary(err) {
		t.Fatalf("no stream until the context ends: %v", err)
	}
}

func TestDeltaFilterDropsStaleEpochs(t *testing.T) {
	msg := func(epoch, seq, text string) *nats.Msg {
		m := nats.NewMsg(wire.DeltaSubject("s_1"))
		m.Data = []byte(`{"step_id":"st_1","text":"` + text + `"}`)
		if epoch != "" {
			m.Header.Set(wire.HeaderEpoch, epoch)
		}
		m.Header.Set(wire.HeaderDeltaSeq, seq)
		return m
	}
	f := natsx.DeltaFilter{Session: "s_1"}
	var got []string
	for _, m := range []*nats.Msg{msg("1", "1", "a"), msg("2", "1", "b"), msg("1", "2", "stale"), msg("", "3", "no epoch"), msg("2", "2", "c")} {
		if d, ok := f.Accept(m); ok {
			got = append(got, fmt.Sprintf("%s/%d/%d/%s/%s", d.Session, d.Epoch, d.Seq, d.StepID, d.Text))
		}
	}
	junk := msg("3", "1", "")
	junk.Data = []byte("not json")
	if _, ok := f.Accept(junk); ok {
		t.Error("a body that is not JSON was accepted")
	}
	if want := "s_1/1/1/st_1/a s_1/2/1/st_1/b s_1/2/2/st_1/c"; strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}
