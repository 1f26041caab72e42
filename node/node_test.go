package node_test

import (
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tahtest"
)

// One node runs turns of the mock's demo (list_files, read_file, an answer)
// in two sessions, is stopped and started again on its data directory, and
// runs their next turns: each input ran once and finished, each session was
// claimed again after the restart, and every log is sound (projection.Audit).
func TestNodeRunsTurnsAcrossARestart(t *testing.T) {
	t.Parallel()
	c := &cluster{t: t, Cluster: tahtest.Start(t, tahtest.Options{Nodes: 1, Pace: time.Millisecond})}
	sids := []string{"s_turns_a", "s_turns_b"}
	first, all := map[string][]string{}, map[string][]string{}
	for _, sid := range sids { // input ids are unique in the stream, not per session
		c.create(sid)
		c.send(sid, sid+"_1", "what is in this project?")
		first[sid] = []string{sid + "_1"}
		all[sid] = []string{sid + "_1", sid + "_2"}
	}
	c.finished(first)
	c.Restart(0)
	for _, sid := range sids {
		c.send(sid, sid+"_2", "and in its docs?")
	}
	c.finished(all)
	for _, sid := range sids {
		rep := c.Audit(sid)
		if by := c.claimedBy(sid); len(by) != 2 || by[0] != "n0" || by[1] != "n0" {
			t.Errorf("%s claimed by %v, want n0 before and after the restart", sid, by)
		}
		for _, turn := range rep.Turns {
			tools := 0
			for _, e := range turn.Events {
				if e.Type == event.ToolFinished {
					tools++
				}
			}
			if tools != 2 {
				t.Errorf("%s: turn %d made %d tool calls, want the demo's 2:\n%s", sid, turn.Turn, tools, rep.Dump())
			}
		}
	}
}
