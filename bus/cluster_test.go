package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// r3 starts a three-server cluster and opens a Bus on it with R3 streams.
func r3(t *testing.T) (*natstest.Cluster, *Bus) {
	t.Helper()
	if testing.Short() {
		t.Skip("three-server cluster: not in -short")
	}
	c := natstest.Start(t, 3)
	b := connected(t, c.URLs(), func(cfg *Config) {
		cfg.Replicas = 3
		cfg.Partitions = 2
	})
	return c, b
}

func TestR3(t *testing.T) {
	t.Parallel()
	c, b := r3(t)
	t.Run("lost acks", func(t *testing.T) { lostAckSuite(t, b) })
	t.Run("fenced", func(t *testing.T) {
		const sid = "s_r3fence"
		a, _ := b.Writer(sid, 1, 0)
		mustAppend(t, a, turn(sid, 0))
		nw, _ := b.Writer(sid, 2, a.LastSeq())
		mustAppend(t, nw, claim(sid, 2))
		if _, err := a.Append(ctxT(t), turn(sid, 1)); !errors.Is(err, ErrFenced) {
			t.Fatalf("err = %v, want ErrFenced", err)
		}
	})
	t.Run("leader change under appends", func(t *testing.T) { leaderChange(t, c, b, "s_lc") })
	t.Run("restart of the leader", func(t *testing.T) {
		const sid = "s_r3restart"
		w, _ := b.Writer(sid, 1, 0)
		before := append(mustAppend(t, w, turn(sid, 0)), mustAppend(t, w, turn(sid, 1))...)
		l := c.StreamLeader(wire.EventShardStream(b.ShardOf(sid)))
		if l < 0 {
			t.Fatal("no stream leader")
		}
		c.Restart(l)
		after := mustAppend(t, w, turn(sid, 2)) // through a new leader
		evs, last := mustReplay(t, b, sid, 0)
		if len(evs) != 3 || last != after[0] || evs[1].Seq != before[1] {
			t.Fatalf("after restart: %d events, last %d", len(evs), last)
		}
	})
}

// leaderChange appends to several sessions while the leaders of the log's
// shards step down twice: every acknowledged event is in the log exactly once, in
// the order of its session's appends, and no writer is wrongly fenced.
func leaderChange(t *testing.T, c *natstest.Cluster, b *Bus, prefix string) {
	const sessions, perSession = 4, 30
	var wg sync.WaitGroup
	acked := make([][]uint64, sessions)
	errs := make([]error, sessions)
	var progress sync.Map // session index -> appended so far, or -1 once failed
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := prefix + string(rune('a'+i))
			w, _ := b.Writer(sid, 1, 0)
			for j := range perSession {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				seqs, err := w.Append(ctx, turn(sid, j))
				cancel()
				if err != nil {
					errs[i] = err
					progress.Store(i, -1)
					return
				}
				acked[i] = append(acked[i], seqs...)
				progress.Store(i, j)
			}
		}()
	}
	stepdown := func() {
		t.Helper()
		for k := range b.Shards() {
			name := wire.EventShardStream(k)
			l := c.StreamLeader(name)
			if l < 0 {
				continue
			}
			if err := c.Member(l).Server().JetStreamStepdownStream(server.DEFAULT_GLOBAL_ACCOUNT, name); err != nil {
				t.Logf("stepdown %s: %v", name, err)
			}
		}
	}
	reached := func(n int) func() bool {
		return func() bool {
			for i := range sessions {
				v, ok := progress.Load(i)
				if !ok || (v.(int) >= 0 && v.(int) < n) {
					return false
				}
			}
			return true
		}
	}
	bustest.Eventually(t, 60*time.Second, "appends under way", reached(5))
	stepdown()
	bustest.Eventually(t, 60*time.Second, "appends past the first stepdown", reached(15))
	stepdown()
	wg.Wait()
	for i := range sessions {
		if errs[i] != nil {
			sid := prefix + string(rune('a'+i))
			dumpLog(t, b, sid)
			t.Fatalf("session %d: %v (acknowledged %v)", i, errs[i], acked[i])
		}
		sid := prefix + string(rune('a'+i))
		evs, last := mustReplay(t, b, sid, 0)
		if len(evs) != perSession || last != acked[i][len(acked[i])-1] {
			t.Fatalf("%s: %d events (last %d), want %d (last %d)", sid, len(evs), last, perSession, acked[i][len(acked[i])-1])
		}
		for j, ev := range evs {
			d, _ := event.DecodeAs[event.TurnStartedData](ev)
			if ev.Seq != acked[i][j] || d.Turn != j+1 {
				t.Fatalf("%s: event %d is turn %d at %d, want turn %d at %d", sid, j, d.Turn, ev.Seq, j+1, acked[i][j])
			}
		}
	}
}

// dumpLog logs every message of a session with its message id.
func dumpLog(t *testing.T, b *Bus, sid string) {
	evs, _, err := b.Replay(context.Background(), sid, 0)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	for _, ev := range evs {
		m, err := b.shards[b.ShardOf(sid)].GetMsg(context.Background(), ev.Seq)
		if err != nil {
			t.Logf("dump %d: %v", ev.Seq, err)
			continue
		}
		t.Logf("%d %s %s", ev.Seq, ev.Type, m.Header.Get(wire.HeaderMsgID))
	}
}
