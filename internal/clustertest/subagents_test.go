package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// Sub-agents across a crash (issue 34: a parent and its children survive a
// kill -9 of either owner; a parent resumed after a crash never spawns a
// child twice for one call). Every node offers the sub-agent "researcher";
// its mock is scripted: a parent's prompt ("team: ...") calls two
// researchers at once, each child answers its task slowly (word by word,
// researchPace apart), and the parent, given both results, sums up. The
// parent and its two children are placed on three different nodes (the
// parent's id is chosen for it), so that a kill hits one of them alone.

// researchPace and researchWords make a child's answer stream for about
// six seconds: the kill lands while it streams, and the child is still
// answering when a parent whose node died is left to wait for it.
const (
	researchPace  = 50 * time.Millisecond
	researchWords = 120
)

// teamInput is the run input sent to the parent.
const teamInput = "in_team"

// teamCall is one of the parent's sub-agent calls: its id (the mock makes it
// up from the turn, the step and the call's place), the task it gives, and
// the child's answer the script has.
type teamCall struct {
	id, task, answer string
}

var teamCalls = []teamCall{
	{"call_1_1_1", "research: the weather", researchAnswer("weather")},
	{"call_1_1_2", "research: the tides", researchAnswer("tides")},
}

// researchAnswer is a child's answer about topic: researchWords words.
func researchAnswer(topic string) string {
	var b strings.Builder
	b.WriteString("About the " + topic + ":")
	for i := range researchWords {
		fmt.Fprintf(&b, " %s%d", topic, i+1)
	}
	return b.String()
}

// spawnInput is the id of the run input a parent sends its child (the
// design's: in_spawn_ and the child's id without s_, taken once).
func spawnInput(child string) string { return "in_spawn_" + strings.TrimPrefix(child, "s_") }

// team is a parent and its children, in teamCalls' order.
type team struct {
	parent   string
	children []string
}

func newTeam(parent string) team {
	tm := team{parent: parent}
	for _, call := range teamCalls {
		tm.children = append(tm.children, session.ChildID(parent, call.id))
	}
	return tm
}

// sessions are the parent then its children.
func (tm team) sessions() []string { return append([]string{tm.parent}, tm.children...) }

// inputOf is the run input that starts sid's turn.
func (tm team) inputOf(sid string) string {
	if sid == tm.parent {
		return teamInput
	}
	return spawnInput(sid)
}

// TestSubAgentParentOwnerKilled: the node of a parent whose two children
// answer (on the two other nodes) is killed with SIGKILL. The children end
// on their nodes and tell the parent, whose partition a survivor takes: it
// resumes the waiting turn, records each call's result from its child's
// log, and finishes; each child ran one turn (no second spawn), each call
// has one result, its child's answer.
func TestSubAgentParentOwnerKilled(t *testing.T) {
	testSubAgentKill(t, func(tm team) string { return tm.parent })
}

// TestSubAgentChildOwnerKilled: the node of one child is killed with
// SIGKILL mid-answer, while its parent (on another node) waits. The child's
// task goes to a survivor, which resumes its turn and finishes it; the
// parent, told by both children, finishes with both answers; each child ran
// one turn. (The other child's news usually comes first: the parent, finding
// the hit child not ended, sends it its task again, which is taken once.)
func TestSubAgentChildOwnerKilled(t *testing.T) {
	testSubAgentKill(t, func(tm team) string { return tm.children[0] })
}

// testSubAgentKill runs a team's turn and kills the node of the session hit
// names while the children answer, then checks every log.
func testSubAgentKill(t *testing.T, hit func(team) string) {
	script := writeTeamScript(t)
	// A dead node's running inputs go to the next owner 5s after its last
	// sign of life (the default is 8s).
	c := newCluster(t, tahtest.Options{InputAckWait: 5 * time.Second,
		SubAgents:  []config.SubAgent{{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}},
		EditConfig: func(_ int, cfg *config.Config) { cfg.LLM.MockScript = script }})
	cl := newClient(t, c)
	recs := c.WaitBalanced(time.Minute, c.IDs()...)
	t.Logf("tah_nodes: %s", tahtest.DescribeNodes(recs))

	tm := placeTeam(t, c, recs)
	createSession(t, c, tm.parent)
	if _, err := cl.send(tm.parent, teamInput, "team: what about the sea?"); err != nil {
		t.Fatalf("send to %s: %v", tm.parent, err)
	}
	owners := waitAnswering(t, c, tm)
	hitSID := hit(tm)
	victim := owners[hitSID]
	before := map[string]projection.Report{}
	for _, sid := range tm.sessions() {
		before[sid] = c.Audit(sid)
	}
	t.Logf("killing %s, the owner of %s (parent %s on %s, children %s on %s and %s on %s)", victim, hitSID,
		tm.parent, owners[tm.parent], tm.children[0], owners[tm.children[0]], tm.children[1], owners[tm.children[1]])
	c.Kill(c.Index(victim))

	logs := map[string]projection.Report{}
	err := natstest.Poll(90*time.Second, 500*time.Millisecond, func() error {
		var waiting []string
		for _, sid := range tm.sessions() {
			rep := c.Audit(sid)
			logs[sid] = rep
			if !rep.InputEnded(tm.inputOf(sid)) {
				waiting = append(waiting, fmt.Sprintf("%s (owner %s)", sid, rep.Owner()))
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("turns not ended: %v", waiting)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after the kill of %s: %v", victim, err)
	}
	t.Logf("the parent's log:\n%s", logs[tm.parent].Dump())
	if hitSID != tm.parent {
		t.Logf("the log of %s, whose turn the kill interrupted:\n%s", hitSID, logs[hitSID].Dump())
	}
	for _, sid := range tm.sessions() {
		rep := logs[sid]
		probs := checkKilled(t, rep, before[sid], tm.inputOf(sid), victim, sid == hitSID)
		if sid == tm.parent {
			probs = append(probs, checkParent(tm, rep, logs)...)
		} else {
			probs = append(probs, checkChild(tm, sid, rep)...)
		}
		if len(probs) > 0 {
			t.Errorf("session %s (hit by the kill: %v):\n%s\n%s  what the nodes logged about it:\n%s", sid, sid == hitSID, probs, rep.Dump(), c.Trace(sid))
		}
	}
	family := map[string][]event.Event{}
	for _, sid := range tm.sessions() {
		family[sid] = logs[sid].Events
	}
	if probs := projection.AuditFamily(family); len(probs) > 0 {
		t.Errorf("the links between the team's logs:\n%s", probs)
	}
}

// writeTeamScript writes the nodes' mock script and returns its path. The
// replies match on the request alone (any number of times), so that a turn
// resumed on another node is answered as on the first.
func writeTeamScript(t *testing.T) string {
	t.Helper()
	afterTool := true
	sumUp := mock.Say("summary: both researchers answered").Always()
	sumUp.AfterTool = &afterTool
	s := mock.NewScript(sumUp)
	for _, call := range teamCalls {
		s.Add(mock.Say(call.answer).OnPrompt(call.task).Paced(researchPace).Always())
	}
	var calls []llm.ToolCall
	for _, call := range teamCalls {
		args, _ := json.Marshal(map[string]string{"task": call.task})
		calls = append(calls, llm.ToolCall{Name: session.AgentToolPrefix + "researcher", Arguments: args})
	}
	s.Add(mock.CallTools(calls...).OnPrompt("team: ").Always())
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "team.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// placeTeam chooses a parent's id whose session and children's sessions are
// in partitions of three different nodes of recs, so that a kill hits one
// of them alone.
func placeTeam(t *testing.T, c *tahtest.Cluster, recs []wire.NodeRecord) team {
	t.Helper()
	parts := c.Config(0).NATS.Partitions
	for j := range 1000 {
		tm := newTeam(fmt.Sprintf("s_team_%d", j))
		seen := map[string]bool{}
		for _, sid := range tm.sessions() {
			if n := partitionOwner(recs, sid, parts); n != "" {
				seen[n] = true
			}
		}
		if len(seen) == len(tm.sessions()) {
			return tm
		}
	}
	t.Fatalf("no parent id puts a team on three nodes of %s", tahtest.DescribeNodes(recs))
	return team{}
}

// createSession creates session sid through the API service; a conflict
// (an earlier attempt that timed out did it) is success.
func createSession(t *testing.T, c *tahtest.Cluster, sid string) {
	t.Helper()
	req, _ := json.Marshal(wire.CreateRequest{Session: sid, Labels: map[string]string{"test": "clustertest"}})
	err := natstest.Poll(60*time.Second, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m, err := c.Bus().Conn().RequestWithContext(ctx, wire.APISubject(wire.EndpointCreate), req)
		if err != nil {
			return err
		}
		if code := m.Header.Get(wire.HeaderServiceErrorCode); code != "" && code != wire.APIErrConflict {
			return fmt.Errorf("create: %s %s", code, m.Header.Get(wire.HeaderServiceError))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("create session %s: %v", sid, err)
	}
}

// waitAnswering waits until the parent waits for both its calls and each
// child's model is answering (its turn has an LLM step open), and returns
// the owner of each session as its log says. The three must be on three
// nodes, as placeTeam chose.
func waitAnswering(t *testing.T, c *tahtest.Cluster, tm team) map[string]string {
	t.Helper()
	owners := map[string]string{}
	err := natstest.Poll(60*time.Second, 200*time.Millisecond, func() error {
		rep := c.Audit(tm.parent)
		if n := countOf(rep.Events, event.ToolStarted); n != len(teamCalls) {
			return fmt.Errorf("the parent started %d calls", n)
		}
		owners[tm.parent] = rep.Owner()
		for _, child := range tm.children {
			rep := c.Audit(child)
			turn, ok := rep.Running()
			if !ok || !llmOpen(turn) {
				return fmt.Errorf("child %s is not answering:\n%s", child, rep.Dump())
			}
			owners[child] = rep.Owner()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the team never got to its children's answers: %v", err)
	}
	seen := map[string]bool{}
	for _, n := range owners {
		seen[n] = true
	}
	if len(seen) != len(tm.sessions()) {
		t.Fatalf("the team is not on three nodes, as tah_nodes placed it: %v", owners)
	}
	return owners
}

// llmOpen reports whether turn has an LLM step started and not ended.
func llmOpen(turn projection.TurnLog) bool {
	open := false
	for _, e := range turn.Events {
		switch e.Type {
		case event.LLMStarted:
			open = true
		case event.LLMCompleted, event.LLMFailed:
			open = false
		}
	}
	return open
}

// countOf counts the events of type typ.
func countOf(evs []event.Event, typ event.Type) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// checkParent: each call of the parent started once, naming its child, and
// finished once, with its child's answer (the child's agent.finished); no
// other tool call started.
func checkParent(tm team, rep projection.Report, logs map[string]projection.Report) projection.Problems {
	var probs projection.Problems
	bad := func(format string, args ...any) {
		probs = append(probs, projection.Problem{Session: rep.Session, What: fmt.Sprintf(format, args...)})
	}
	started, finished := map[string]int{}, map[string][]event.ToolFinishedData{}
	for _, e := range rep.Events {
		switch e.Type {
		case event.ToolStarted:
			d, err := event.DecodeAs[event.ToolStartedData](e)
			if err != nil {
				bad("seq %d: %v", e.Seq, err)
				continue
			}
			started[d.Call.ID]++
			if want := event.AgentRunnerPrefix + session.ChildID(tm.parent, d.Call.ID); d.Runner != want {
				bad("call %s started with runner %q, want %q", d.Call.ID, d.Runner, want)
			}
		case event.ToolFinished:
			d, err := event.DecodeAs[event.ToolFinishedData](e)
			if err != nil {
				bad("seq %d: %v", e.Seq, err)
				continue
			}
			finished[d.CallID] = append(finished[d.CallID], d)
		}
	}
	if len(started) != len(teamCalls) {
		bad("calls started: %v, want %d", started, len(teamCalls))
	}
	for i, call := range teamCalls {
		child := tm.children[i]
		if started[call.id] != 1 {
			bad("call %s started %d times", call.id, started[call.id])
		}
		fs := finished[call.id]
		if len(fs) != 1 {
			bad("call %s finished %d times: %+v", call.id, len(fs), fs)
			continue
		}
		answer, ok := lastAnswer(logs[child])
		switch {
		case !ok:
			bad("call %s finished, but its child %s has no answer", call.id, child)
		case fs[0].IsError || fs[0].Output != answer:
			bad("call %s finished with %q (error %v), not its child %s's answer %q", call.id, fs[0].Output, fs[0].IsError, child, answer)
		}
	}
	return probs
}

// checkChild: the child was made once, by its parent's call, and answered
// its task with the script's answer.
func checkChild(tm team, child string, rep projection.Report) projection.Problems {
	var probs projection.Problems
	bad := func(format string, args ...any) {
		probs = append(probs, projection.Problem{Session: child, What: fmt.Sprintf(format, args...)})
	}
	if n := countOf(rep.Events, event.SessionCreated); n != 1 {
		bad("created %d times", n)
	}
	var st projection.State
	projection.FoldLog(&st, rep.Events)
	var call teamCall
	for i, c := range teamCalls {
		if tm.children[i] == child {
			call = c
		}
	}
	if p := st.Parent; p == nil || p.Session != tm.parent || p.CallID != call.id {
		bad("its parent link is %+v, want session %s call %s", p, tm.parent, call.id)
	}
	if answer, ok := lastAnswer(rep); !ok || answer != call.answer {
		bad("answered %q, want %q", answer, call.answer)
	}
	return probs
}

// lastAnswer is the content of the last agent.finished of rep.
func lastAnswer(rep projection.Report) (string, bool) {
	for i := len(rep.Events) - 1; i >= 0; i-- {
		if e := rep.Events[i]; e.Type == event.AgentFinished {
			d, err := event.DecodeAs[event.AgentFinishedData](e)
			return d.Content, err == nil
		}
	}
	return "", false
}
