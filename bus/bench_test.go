package bus

import (
	"context"
	"fmt"
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
