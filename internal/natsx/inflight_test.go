package natsx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// TestPublishRetryingWaitsForItsInFlightTry: a retry of an input whose first
// try is still being replicated gets "duplicate message id is in process"
// (JetStream 10158) from an R3 stream's leader, and PublishRetrying takes it
// for what it is, the first try not acknowledged yet: it tries again until it
// gets the acknowledgement, and the input is stored once. The first try is
// held in flight for as long as the test needs by the leader's lost quorum
// (its two followers killed): it proposes the message and cannot apply it.
func TestPublishRetryingWaitsForItsInFlightTry(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster: not in -short")
	}
	c := natstest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only catches a hang
	defer cancel()
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	const stream = "IN"
	// Each try on a bound of its own: on a loaded machine a request sent
	// while the meta group settles can go unanswered (a hog run lost the
	// whole two minutes on one try).
	err = natstest.Poll(2*time.Minute, 100*time.Millisecond, func() error {
		try, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := js.CreateStream(try, jetstream.StreamConfig{Name: stream, Subjects: []string{wire.NamedInputSubjects}, Replicas: 3})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitLeaders(stream)
	l := c.StreamLeader(stream)
	if l < 0 {
		t.Fatal("no stream leader")
	}
	// The client talks to the leader alone, which keeps leading (it steps
	// down only after ten seconds without its followers) while they are away.
	nc, err := nats.Connect(c.Layout().Slots[l].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ljs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := natsx.NewInputMsg("s_1", wire.NodeSender, wire.Input{Command: wire.CommandResume}, nc.MaxPayload())
	if err != nil {
		t.Fatal(err)
	}
	var followers []int
	for i := range c.Size() {
		if i != l {
			followers = append(followers, i)
			c.Kill(i)
		}
	}
	// The first try: proposed, never acknowledged while the followers are away.
	first, cancelFirst := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = ljs.PublishMsg(first, m)
	cancelFirst()
	if !natsx.Temporary(err) {
		t.Fatalf("first try without a quorum: %v, want a timeout", err)
	}

	inProcess := make(chan struct{})
	type result struct {
		ack *jetstream.PubAck
		err error
	}
	done := make(chan result, 1)
	go func() {
		seen := false
		ack, err := natsx.PublishRetrying(ctx, ljs, m, func(err error) {
			var apiErr *jetstream.APIError
			if !seen && errors.As(err, &apiErr) && apiErr.ErrorCode == natsx.JSErrCodeDuplicateInProcess {
				seen = true
				close(inProcess)
			}
		})
		done <- result{ack, err}
	}()
	select {
	case <-inProcess: // the server said 10158, and the publish goes on
	case r := <-done:
		t.Fatalf("the retry ended while its first try was in flight: %+v, %v", r.ack, r.err)
	case <-ctx.Done():
		t.Fatal("no retry was answered \"duplicate message id is in process\"")
	}
	for _, i := range followers {
		c.Start(i)
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the retry did not end once the followers were back")
	}
	if r.err != nil {
		t.Fatalf("retry: %v", r.err)
	}
	t.Logf("acknowledged at %d (duplicate: %v)", r.ack.Sequence, r.ack.Duplicate)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stored %+v times (%v), want once", info.State, err)
	}
}
