package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tah-dev/tah/wire"
)

// A schedule fires into its session's input partition as an ordinary run
// input, one id per occurrence; an @every one fires again and again until
// removed; an @at one fires once and is gone from the list.
func TestSchedulesFireIntoTheSessionsInputs(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	ctx := ctxT(t)
	const sid = "s_sched0000000000000a"
	if _, err := b.AddSchedule(ctx, sid, "tick", "@every 1s", "", "tick"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	if _, err := b.AddSchedule(ctx, sid, "once", "@at "+at.Format(time.RFC3339), "", "once"); err != nil {
		t.Fatal(err)
	}
	list, err := b.Schedules(ctx, sid)
	if err != nil || len(list) != 2 || list[0].Name != "once" || list[1].Spec != "@every 1s" || list[1].Text != "tick" {
		t.Fatalf("schedules %+v, %v", list, err)
	}
	ids := map[string]bool{}
	ticks, onces := 0, 0
	inputs := make(chan *InputMsg, 64)
	c, err := b.ConsumeInputs(ctx, func(ctx context.Context, m *InputMsg) {
		_ = m.Ack(ctx)
		inputs <- m
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for ticks < 3 || onces < 1 {
		var in *InputMsg
		select {
		case in = <-inputs:
		case <-ctx.Done():
			t.Fatalf("%d ticks and %d onces came", ticks, onces)
		}
		if in.Command != wire.CommandRun || in.Session != sid || ids[in.ID] {
			t.Fatalf("input %+v (ids so far %v)", in, ids)
		}
		ids[in.ID] = true
		switch in.Text {
		case "tick":
			ticks++
		case "once":
			onces++
		default:
			t.Fatalf("input %+v", in)
		}
	}
	if removed, err := b.RemoveSchedule(ctx, sid, "tick"); err != nil || !removed {
		t.Fatalf("remove: %v %v", removed, err)
	}
	if removed, err := b.RemoveSchedule(ctx, sid, "tick"); err != nil || removed {
		t.Fatalf("remove again: %v %v", removed, err)
	}
	if list, err := b.Schedules(ctx, sid); err != nil || len(list) != 0 {
		t.Fatalf("after: %+v %v", list, err)
	}
	if _, err := b.AddSchedule(ctx, sid, "bad name", "@every 1s", "", "x"); !errors.Is(err, wire.ErrBadSchedule) {
		t.Fatalf("a bad name: %v", err)
	}
}
