package projection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tah-dev/tah/event"
)

// AuditFamily checks the links between sub-agents' sessions and their
// parents across logs (each session's whole log, by session id), what no
// one log can tell:
//
//   - every child (a session.created with a parent) answers a call of its
//     parent whose tool.started names it (runner agent:<child>): no orphan
//     child, when the parent's log is given;
//   - every call that names a child has the child's log, whose parent link
//     names that parent and that call, and whose spawn input (in_spawn_…)
//     started one turn at most: no call made two children, or one twice;
//   - a call answered from a child that completed has the child's answer
//     as its output (unless the output was too large for the log and is
//     an artifact), and one the parent's cancel answered (code cancelled)
//     has a child that runs no more: no orphan running after its parent's
//     cancel.
//
// Each session's own log is Audit's. A log cut mid-way (a node still
// writing) may show a child not yet made or a cancel not yet carried out:
// audit once the work is over.
func AuditFamily(logs map[string][]event.Event) Problems {
	states := make(map[string]*State, len(logs))
	ids := make([]string, 0, len(logs))
	for id, evs := range logs {
		var st State
		FoldLog(&st, evs)
		states[id] = &st
		ids = append(ids, id)
	}
	slices.Sort(ids) // problems in a stable order
	var out Problems
	bad := func(sid, format string, args ...any) {
		out = append(out, Problem{Session: sid, What: fmt.Sprintf(format, args...)})
	}
	for _, id := range ids {
		st := states[id]
		if p := st.Parent; p != nil {
			if parent, ok := states[p.Session]; ok && !namesChild(parent, p.CallID, id) {
				bad(id, "a child of %s's call %s, which names no such child (an orphan)", p.Session, p.CallID)
			}
		}
		for _, step := range st.Steps {
			if step.Child == "" {
				continue
			}
			child, ok := states[step.Child]
			switch {
			case !ok:
				continue // not given: nothing to check it against
			case child.Parent == nil || child.Parent.Session != id || child.Parent.CallID != step.CallID:
				bad(id, "call %s names child %s, whose parent link is %+v", step.CallID, step.Child, child.Parent)
				continue
			}
			if n := spawnTurns(logs[step.Child]); n > 1 {
				bad(id, "call %s: its child %s started %d turns from its task (spawned more than once)", step.CallID, step.Child, n)
			}
			if !step.Status.Done() {
				continue
			}
			switch {
			case step.Code == event.CodeCancelled && child.Status.Active():
				bad(id, "call %s was cancelled, but its child %s still runs (%s)", step.CallID, step.Child, child.Status)
			case step.Status == StepCompleted && child.Status == StatusCompleted && step.Artifact == nil && step.Output != child.LastOutput:
				bad(id, "call %s's result %q is not its child %s's answer %q", step.CallID, clipped(step.Output), step.Child, clipped(child.LastOutput))
			}
		}
	}
	return out
}

// namesChild reports whether st has a sub-agent call callID whose child is
// child.
func namesChild(st *State, callID, child string) bool {
	for _, s := range st.Steps {
		if s.CallID == callID && s.Child == child {
			return true
		}
	}
	return false
}

// spawnTurns counts the turns a child's spawn input started.
func spawnTurns(evs []event.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type != event.TurnStarted {
			continue
		}
		if d, err := event.DecodeAs[event.TurnStartedData](e); err == nil && strings.HasPrefix(d.InputID, "in_spawn_") {
			n++
		}
	}
	return n
}

func clipped(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
