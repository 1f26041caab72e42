package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// inProcessCluster starts three servers, sets the log up at R3 and returns
// the cluster, the leader of sid's shard, and a Bus with appends tried for a
// second: on that leader alone when onLeader (so that its publishes reach the
// leader whatever happens to the others), else on every server.
//
// Its tests run alone in the package (no t.Parallel): they kill the
// leader's followers and need it to answer while it is leader without a
// quorum, which nats-server ends by a timer (about ten seconds without
// its followers); on a loaded machine (this package four tests at a time
// beside package node's) the writer's retries outlasted it once, and the
// writer then waits for a leader to read the log from, as it should.
func inProcessCluster(t *testing.T, sid string, onLeader bool) (*natstest.Cluster, int, *Bus) {
	t.Helper()
	if testing.Short() {
		t.Skip("three-server cluster: not in -short")
	}
	c := natstest.Start(t, 3)
	setup := connected(t, c.URLs(), func(cfg *Config) { cfg.Replicas, cfg.Partitions = 3, 2 })
	stream := wire.EventShardStream(setup.ShardOf(sid))
	c.WaitLeaders(stream)
	l := c.StreamLeader(stream)
	if l < 0 {
		t.Fatal("no leader of", stream)
	}
	url := c.URLs()
	if onLeader {
		url = c.Layout().Slots[l].URL()
	}
	b := connected(t, url, func(cfg *Config) {
		cfg.Replicas, cfg.Partitions, cfg.NoSetup, cfg.AppendTimeout = 3, 2, true, time.Second
	})
	return c, l, b
}

// attempts counts the messages published on sid's subject at server url
// whose Nats-Msg-Id starts with prefix, and closes reached once it has seen
// n of them.
func attempts(t *testing.T, url, subject, prefix string, n int) <-chan struct{} {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	reached := make(chan struct{})
	seen := 0
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { // one callback at a time
		if strings.HasPrefix(m.Header.Get(wire.HeaderMsgID), prefix) {
			if seen++; seen == n {
				close(reached)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return reached
}

// TestAppendWaitsForItsInFlightAttempt: an append whose acknowledgement did
// not come in time (its leader lost its followers, so the record is proposed
// and not applied) is tried again, and the R3 leader answers the retry
// "duplicate message id is in process" (10158). That is no outcome: the
// writer goes on trying, and once the followers are back it gets the
// record's acknowledgement, stored once, rather than ErrOutcomeUnknown.
func TestAppendWaitsForItsInFlightAttempt(t *testing.T) {
	// Not t.Parallel: see inProcessCluster.
	const sid = "s_inflight"
	c, l, b := inProcessCluster(t, sid, true)
	w, _ := b.Writer(sid, 1, 0)
	mustAppend(t, w, turn(sid, 0))
	// The writer's first attempt, the retry the leader answers 10158, and a
	// third that only a writer that took 10158 for "in flight" makes.
	third := attempts(t, c.Layout().Slots[l].URL(), wire.ShardSubject(b.ShardOf(sid), sid), w.idPrefix, 3)
	var followers []int
	for i := range c.Size() {
		if i != l {
			followers = append(followers, i)
			c.Kill(i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only catches a hang
	defer cancel()
	type result struct {
		seqs []uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		seqs, err := w.Append(ctx, turn(sid, 1))
		done <- result{seqs, err}
	}()
	select {
	case <-third:
	case r := <-done:
		t.Fatalf("the append ended while its first attempt was in flight: %v, %v", r.seqs, r.err)
	case <-ctx.Done():
		t.Fatal("the writer did not try a third time")
	}
	for _, i := range followers {
		c.Start(i)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("append once the followers are back: %v", r.err)
	}
	evs, last := mustReplay(t, b, sid, 0)
	if len(evs) != 2 || last != r.seqs[0] {
		t.Fatalf("log: %d events, last %d; the append's %v", len(evs), last, r.seqs)
	}
}

// TestAppendIsNotFencedByAnInProcessAppend: while another fenced message of
// the session's subject is proposed and not applied, an R3 leader refuses an
// append with "wrong last sequence" without a sequence (10164), before any
// sequence is compared. That is not a fence (that other message may never
// land, or be the writer's own previous append, acknowledged before the
// leader cleared its mark): here it is lost with its leader, and the writer,
// which tried again, appends after a new leader is elected instead of
// stopping as fenced.
func TestAppendIsNotFencedByAnInProcessAppend(t *testing.T) {
	// Not t.Parallel: see inProcessCluster.
	const sid = "s_inprocess"
	c, l, b := inProcessCluster(t, sid, false)
	w, _ := b.Writer(sid, 1, 0)
	mustAppend(t, w, turn(sid, 0))
	subject := wire.ShardSubject(b.ShardOf(sid), sid)
	second := attempts(t, c.Layout().Slots[l].URL(), subject, w.idPrefix, 2)
	var followers []int
	for i := range c.Size() {
		if i != l {
			followers = append(followers, i)
			c.Kill(i)
		}
	}
	// Another writer's fenced message, proposed by the leader alone: in
	// process for as long as the followers are away, and lost with the leader.
	other, _ := b.Writer(sid, 1, w.LastSeq())
	m, err := other.message([]event.Event{turn(sid, 9)})
	if err != nil {
		t.Fatal(err)
	}
	other.setHeaders(m, w.LastSeq(), other.positionID)
	nc, err := nats.Connect(c.Layout().Slots[l].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.RequestMsg(m, 500*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("the other message without a quorum: %v, want a timeout", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only catches a hang
	defer cancel()
	type result struct {
		seqs []uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		seqs, err := w.Append(ctx, turn(sid, 1))
		done <- result{seqs, err}
	}()
	select {
	case <-second:
	case r := <-done:
		t.Fatalf("the append ended while another message was in process: %v, %v", r.seqs, r.err)
	case <-ctx.Done():
		t.Fatal("the writer did not try a second time")
	}
	// The leader goes with the other message; the followers elect another.
	c.Kill(l)
	for _, i := range followers {
		if err := c.Member(i).Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("append after the new leader: %v", r.err)
	}
	evs, last := mustReplay(t, b, sid, 0)
	if len(evs) != 2 || last != r.seqs[0] || evs[1].Seq != r.seqs[0] {
		t.Fatalf("log: %d events, last %d; the append's %v", len(evs), last, r.seqs)
	}
}
