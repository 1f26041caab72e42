package projection

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// family writes a parent whose call c1 made child "s_kid", and the child's
// log: made by its spawn input, answered with answer (a cancelled child
// when answer is ""); the parent's call gets output, code.
type family struct {
	parent, child *logBuilder
}

func newFamily(t *testing.T) family {
	p := newLog(t, "s_mom", event.Config{})
	p.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1"})
	p.tools = []llm.ToolSchema{{Name: "agent_kid"}}
	p.turn(1, "ask the kid")
	p.llm("", call("c1", "agent_kid", `{"task":"look"}`))
	p.add(event.ToolStarted, event.ToolStartedData{StepID: p.nextStep(), Call: call("c1", "agent_kid", `{"task":"look"}`), Runner: "agent:s_kid"})
	c := &logBuilder{t: t, sid: "s_kid"}
	c.add(event.SessionCreated, event.SessionCreatedData{Parent: &event.ParentLink{Session: "s_mom", CallID: "c1", Agent: "kid", Depth: 1}})
	c.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n2"})
	return family{p, c}
}

func (f family) spawned() family {
	f.child.add(event.TurnStarted, event.TurnStartedData{Turn: f.child.st.Turn + 1, Message: llm.User("look"), InputID: "in_spawn_kid"})
	return f
}

// logs are the two logs, each event after the claim of epoch 1 written
// in it, as an owner writes.
func (f family) logs() map[string][]event.Event {
	owned := func(evs []event.Event) []event.Event {
		out := append([]event.Event(nil), evs...)
		for i := range out {
			if out[i].Type != event.SessionCreated {
				out[i].Epoch = 1
			}
		}
		return out
	}
	return map[string][]event.Event{"s_mom": owned(f.parent.events), "s_kid": owned(f.child.events)}
}

func (f family) answer(output, code string) family {
	step := f.parent.st.WaitingChildren()[0].ID
	f.parent.add(event.ToolFinished, event.ToolFinishedData{StepID: step, CallID: "c1", Name: "agent_kid", Output: output, Code: code, IsError: code != ""})
	return f
}

// AuditFamily passes a sound family and names each broken link: an orphan
// child, a child whose link names another call, a child spawned twice, a
// cancelled call whose child runs on, a result that is not the child's
// answer.
func TestAuditFamily(t *testing.T) {
	sound := newFamily(t).spawned()
	sound.child.llm("found it").finish(1, "found it")
	sound.answer("found it", "")
	if ps := AuditFamily(sound.logs()); len(ps) > 0 {
		t.Fatalf("a sound family: %s", ps)
	}

	cases := map[string]struct {
		logs func(t *testing.T) map[string][]event.Event
		want []string
	}{
		"orphan": {func(t *testing.T) map[string][]event.Event {
			f := newFamily(t).spawned()
			logs := f.logs()
			logs["s_mom"] = logs["s_mom"][:len(logs["s_mom"])-1] // the call's tool.started gone
			return logs
		}, []string{"an orphan"}},
		"wrong link": {func(t *testing.T) map[string][]event.Event {
			f := newFamily(t)
			logs := f.logs()
			created, _ := event.New("s_kid", event.SessionCreated, event.SessionCreatedData{Parent: &event.ParentLink{Session: "s_mom", CallID: "c9", Agent: "kid", Depth: 1}})
			created.Seq, created.Time = 1, t0
			logs["s_kid"][0] = created
			return logs
		}, []string{"an orphan", "whose parent link"}}, // either way round
		"spawned twice": {func(t *testing.T) map[string][]event.Event {
			f := newFamily(t).spawned()
			f.child.llm("one").finish(1, "one")
			f.spawned()
			return f.logs()
		}, []string{"started 2 turns"}},
		"runs after its parent's cancel": {func(t *testing.T) map[string][]event.Event {
			return newFamily(t).spawned().answer("cancelled", event.CodeCancelled).logs()
		}, []string{"still runs"}},
		"not the child's answer": {func(t *testing.T) map[string][]event.Event {
			f := newFamily(t).spawned()
			f.child.llm("found it").finish(1, "found it")
			return f.answer("made up", "").logs()
		}, []string{"is not its child"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ps := AuditFamily(c.logs(t))
			if len(ps) != len(c.want) {
				t.Fatalf("want problems %q, got:\n%s", c.want, ps)
			}
			for _, w := range c.want {
				if !strings.Contains(ps.String(), w) {
					t.Errorf("no problem says %q:\n%s", w, ps)
				}
			}
		})
	}
}
