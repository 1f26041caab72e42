package natstest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Three servers: a stream's leader moved, killed, replaced by an election,
// and started again on its store.
func TestServersCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three servers: not in -short")
	}
	c := Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := c.JetStream()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeaders("T")
	c.MoveLeader("T", 1)
	if l := c.Leaders(); !slices.Contains(l.Of(1), "T") || l.Consumers["T/C"] < 0 {
		t.Fatalf("leaders after the move: %+v", l)
	}
	// The moved leader answers once it has taken over: the publish is
	// tried again until then (a deadline catches a hang only).
	if err := Poll(readyWithin, 100*time.Millisecond, func() error {
		_, err := js.Publish(ctx, "t.a", []byte("x"), jetstream.WithMsgID("t.a"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.Kill(1)
	if c.Running(1) || c.Member(1).Server() != nil {
		t.Fatal("a killed server runs")
	}
	c.WaitLeaders("T")
	if l := c.StreamLeader("T"); l < 0 || l == 1 {
		t.Fatalf("leader %d after the kill of 1", l)
	}
	c.Start(1)
	c.WaitLeaders()
	if _, err := js.Publish(ctx, "t.b", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("after the restart: %+v %v", info, err)
	}
}
