package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// An @at schedule fires once in a cluster of three: with every node up, and
// with the server that leads the schedules' stream killed before it is due
// (another takes the lead and fires it). Each fired once: one turn, of the
// schedule's text, finished; the definition is gone, so it cannot fire again.
func TestClusterSchedulesFireOnceThroughANodesDeath(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.balanced("n0", "n1", "n2")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	due := func() string {
		return "@at " + time.Now().Add(3*time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	up, killed := "s_sched_all_up", "s_sched_killed"
	for _, sid := range []string{up, killed} {
		c.create(sid)
	}
	if _, err := c.Bus().AddSchedule(ctx, up, "later", due(), "", "all up"); err != nil {
		t.Fatal(err)
	}
	fired(t, c, up, "all up")

	victim := c.StreamLeader(wire.ScheduleStream)
	if victim < 0 {
		t.Fatal("no leader of the schedules' stream")
	}
	if _, err := c.Bus().AddSchedule(ctx, killed, "later", due(), "", "one node down"); err != nil {
		t.Fatal(err)
	}
	c.Kill(victim)
	fired(t, c, killed, "one node down")
	for _, sid := range []string{up, killed} {
		if list, err := c.Bus().Schedules(ctx, sid); err != nil || len(list) != 0 {
			t.Errorf("%s's schedules after it fired: %+v %v", sid, list, err)
		}
	}
}

// fired waits until sid's log holds a finished turn, and checks it is the
// only one, of text.
func fired(t *testing.T, c *cluster, sid, text string) {
	t.Helper()
	err := natstest.Poll(90*time.Second, 100*time.Millisecond, func() error {
		evs, err := c.Log(sid)
		if err != nil {
			return err
		}
		var started []string
		finished := 0
		for _, ev := range evs {
			switch ev.Type {
			case event.TurnStarted:
				d, _ := event.DecodeAs[event.TurnStartedData](ev)
				started = append(started, d.Message.Content)
			case event.AgentFinished:
				finished++
			}
		}
		if finished == 0 {
			return fmt.Errorf("%s: no turn finished yet (%d started)", sid, len(started))
		}
		if len(started) != 1 || started[0] != text || finished != 1 {
			t.Fatalf("%s: turns %q, %d finished: want one of %q", sid, started, finished, text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
