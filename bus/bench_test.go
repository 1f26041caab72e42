package bus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// BenchmarkAppend measures one fenced, acknowledged append of one event to
// one session, with fsync on every write (the default) and with fsync every
// second.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync time.Duration
	}{{"SyncAlways", 0}, {"Sync1s", time.Second}} {
		b.Run(mode.name, func(b *testing.B) {
			bus := embedded(b, func(c *Config) { c.SyncInterval = mode.sync })
			w, _ := bus.Writer("s_bench", 1, 0)
			ev := turn("s_bench", 0)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				e := ev
				if _, err := w.Append(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplay measures reading back one session's 100 events interleaved
// with 1,000 other sessions (10 events each, 10,100 records in the target's
// shard, as if all hashed there), by batched direct get (what Replay does) and
// by an ephemeral filtered consumer.
func BenchmarkReplay(b *testing.B) {
	bus := embedded(b, func(c *Config) { c.SyncInterval = time.Minute })
	ctx := context.Background()
	// Fill the stream fast: plain async publishes, the target session spread
	// evenly through it.
	const others, perOther, target = 1000, 10, 100
	body := func(sid string, i int) []byte {
		e := turn(sid, i)
		e.Time = time.Now()
		data, _ := event.EncodeRecord([]event.Event{e})
		return data
	}
	k := bus.ShardOf("s_target")
	n := 0
	for i := range perOther {
		for o := range others {
			sid := fmt.Sprintf("s_o%04d", o)
			if _, err := bus.js.PublishAsync(wire.ShardSubject(k, sid), body(sid, i)); err != nil {
				b.Fatal(err)
			}
			if n%100 == 0 && n/100 < target {
				if _, err := bus.js.PublishAsync(wire.ShardSubject(k, "s_target"), body("s_target", n/100)); err != nil {
					b.Fatal(err)
				}
			}
			n++
		}
	}
	select {
	case <-bus.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	for _, v := range []struct {
		name string
		fn   func(context.Context, string, uint64) ([]event.Event, uint64, error)
	}{{"DirectGet", bus.Replay}, {"Consumer", bus.replayConsumer}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				evs, _, err := v.fn(ctx, "s_target", 0)
				if err != nil || len(evs) != target {
					b.Fatalf("%d events, %v", len(evs), err)
				}
			}
		})
		b.Run(v.name+"Tail10", func(b *testing.B) {
			// resume from a checkpoint: the last 10 events
			all, _, _ := bus.Replay(ctx, "s_target", 0)
			from := all[target-10].Seq
			for b.Loop() {
				evs, _, err := v.fn(ctx, "s_target", from)
				if err != nil || len(evs) != 10 {
					b.Fatalf("%d events, %v", len(evs), err)
				}
			}
		})
	}
}

// BenchmarkInputs measures TAH_IN, the one stream every turn's input goes
// through, with fsync on every write: N sessions publish an input each, all
// at once, again and again, stored only ("stored"), or also taken by a
// consumer of every partition and acknowledged as the node does once a
// turn ends ("acked": the ack waits for the server, and deletes the input).
// It reports inputs/s, to set beside BenchmarkGroupCommit's appends/s of
// the log's shards.
func BenchmarkInputs(b *testing.B) {
	for _, n := range []int{16, 1000} {
		for _, mode := range []string{"stored", "acked"} {
			b.Run(fmt.Sprintf("%s/sessions=%d", mode, n), func(b *testing.B) {
				bus := embedded(b)
				ctx := context.Background()
				var acked sync.WaitGroup
				if mode == "acked" {
					c, err := bus.ConsumeInputs(ctx, func(ctx context.Context, m *InputMsg) {
						go func() {
							defer acked.Done()
							if err := m.Ack(ctx); err != nil {
								b.Error(err)
							}
						}()
					})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(c.Stop)
				}
				inputs, round := 0, 0
				for b.Loop() {
					round++
					var wg sync.WaitGroup
					if mode == "acked" {
						acked.Add(n)
					}
					for i := range n {
						wg.Add(1)
						go func() {
							defer wg.Done()
							sid := fmt.Sprintf("s_in%04d", i)
							in := wire.Input{ID: fmt.Sprintf("in_%d_%d", round, i), Command: wire.CommandRun, Text: "hello"}
							if _, err := bus.PublishInput(ctx, sid, in); err != nil {
								b.Error(err)
							}
						}()
					}
					wg.Wait()
					if mode == "acked" {
						acked.Wait()
					}
					inputs += n
				}
				b.ReportMetric(float64(inputs)/b.Elapsed().Seconds(), "inputs/s")
			})
		}
	}
}
