package clustertest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// callerTimeout is the inactivity timeout the agent protocol recommends to
// callers: a stream silent for this long is given up. A stream that waits
// this long for its next message is the silent hang the protocol forbids.
const callerTimeout = 60 * time.Second

// TestAgentStreamSurvivesKill: a caller of the agent protocol, connected to a
// node that stays up, prompts a session through the controller; the node that
// runs the turn is killed with SIGKILL while the answer streams. What the
// caller sees (docs/agent-protocol.md):
//
//	ack, session:<sid>, tool:list_files, tool:read_file, response chunks
//	(the answer's beginning), then nothing while the survivors notice the
//	death and the input's redelivery waits (node TTL, input ack wait), then
//	status "restarted", response chunks of the whole answer from its start
//	(the text of the turn's completed steps in one chunk, then the live
//	deltas), then the terminator, and nothing after it.
//
// The text after the last "restarted" is the turn's answer as the log has
// it (agent.finished); there is no error; the log shows the turn resumed
// and finished once by a survivor. The silence around the kill is logged:
// it must stay well below the caller's 60 s inactivity timeout.
func TestAgentStreamSurvivesKill(t *testing.T) {
	// As TestKillMidTurn: about 80 tokens at 60ms, so that the answer
	// streams for seconds; a dead node's running input goes to the next
	// owner 5s after its last sign of life.
	c := newCluster(t, tahtest.Options{Pace: 60 * time.Millisecond, InputAckWait: 5 * time.Second})
	cl := newClient(t, c)
	recs := c.WaitBalanced(time.Minute, c.IDs()...)
	t.Logf("tah_nodes: %s", tahtest.DescribeNodes(recs))

	// The session first, so that its owner is known before the caller
	// connects: the caller must be on a node that is not killed (it would
	// lose its subscription, and what was published meanwhile).
	sid := cl.create()
	owner := partitionOwner(recs, sid, c.Config(0).NATS.Partitions)
	at := -1
	for i, id := range c.IDs() {
		if id != owner {
			at = i
			break
		}
	}
	if owner == "" || at < 0 {
		t.Fatalf("no owner of %s's partition in tah_nodes: %s", sid, tahtest.DescribeNodes(recs))
	}
	nc := agentCaller(t, c, at, "alice")
	t.Logf("session %s, owned by %s; the caller is connected to %s", sid, owner, c.ID(at))

	req, _ := json.Marshal(wire.Envelope{Prompt: "what is in this project?", Session: sid})
	s := openAgentStream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, c.Config(0).Agents.Owner, wire.AgentController), req)

	// Until the answer streams: a few response chunks.
	for s.count(wire.ChunkResponse) < 5 {
		if m := s.next(); m.end || m.code != "" {
			t.Fatalf("the stream ended before the answer: %s", s.transcript())
		}
	}
	before := c.Audit(sid)
	turn, running := before.Running()
	victim := before.Owner()
	if !running || !turn.Answering {
		t.Fatalf("response chunks arrived but the log has no turn answering:\n%s", before.Dump())
	}
	if victim == c.ID(at) {
		t.Fatalf("the turn runs on %s, the caller's node, not on %s, its partition's owner:\n%s", victim, owner, before.Dump())
	}
	beforeKill := len(s.got)
	t.Logf("killing %s, which runs the turn of %s, after %d messages", victim, sid, beforeKill)
	s.killed = time.Now()
	c.Kill(c.Index(victim))
	killed := s.killed

	for !s.last().end {
		s.next()
	}
	// Nothing after the terminator: not the 409 of the input's redelivery
	// refused as busy, not its turn streamed again (the redelivery comes
	// within the input ack wait of the kill, long before this), not a
	// second node streaming the same turn.
	if m, ok := s.wait(5 * time.Second); ok {
		t.Errorf("a message after the terminator: %+v", m)
	}
	t.Logf("what the caller saw: %s", s.transcript())

	// The log: the turn ended once, finished by a survivor that claimed it.
	var final string
	var rep projection.Report
	err := natstest.Poll(30*time.Second, 300*time.Millisecond, func() error {
		rep = c.Audit(sid)
		if len(rep.Turns) != 1 || !rep.Turns[0].Ended() {
			return fmt.Errorf("want one turn, ended: %d turns", len(rep.Turns))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the terminator, the log of %s: %v\n%s", sid, err, rep.Dump())
	}
	if probs := checkKilled(t, rep, before, rep.Turns[0].InputID, victim, true); len(probs) > 0 {
		t.Errorf("session %s:\n%s\n%s  what the nodes logged about it:\n%s", sid, probs, rep.Dump(), c.Trace(sid))
	}
	if end := rep.Turns[0].Ends[0]; end.Type == event.AgentFinished {
		d, err := event.DecodeAs[event.AgentFinishedData](end)
		if err != nil {
			t.Fatalf("agent.finished at seq %d: %v", end.Seq, err)
		}
		final = d.Content
	}
	if final == "" {
		t.Fatalf("no answer in the log:\n%s", rep.Dump())
	}

	// The stream: ack first, no error, "restarted" after the kill, and the
	// text after the last one is the whole answer.
	restarted := -1
	for i, m := range s.got {
		if m.code != "" {
			t.Errorf("an error in the stream (message %d): %s %s", i, m.code, m.body)
		}
		if m.chunk.Type == wire.ChunkStatus && m.chunk.Data == wire.StatusRestarted {
			restarted = i
		}
	}
	if st := s.statuses(); len(st) == 0 || st[0] != wire.StatusAck {
		t.Errorf("statuses %v: want ack first", st)
	}
	if restarted < beforeKill {
		t.Fatalf("no status %q after the kill: %s", wire.StatusRestarted, s.transcript())
	}
	if got := agentText(s.got); got != final {
		t.Errorf("the text after the last %q:\n%q\nthe answer in the log:\n%q", wire.StatusRestarted, got, final)
	}
	if partial := agentText(s.got[:beforeKill]); !strings.HasPrefix(final, partial) {
		t.Errorf("the text before the kill is not the answer's beginning:\n%q\nthe answer:\n%q", partial, final)
	}

	// The silence the kill caused, as the caller lives it: from the last
	// message before the kill to "restarted"; and the longest silence of the
	// whole stream. No threshold (timings vary with the machine), but it
	// must stay well below the caller's timeout: next fails at 60 s.
	var lastBefore time.Time
	for _, m := range s.got {
		if !m.at.After(killed) {
			lastBefore = m.at
		}
	}
	gap := s.got[restarted].at.Sub(lastBefore)
	longest := time.Duration(0)
	for i := 1; i < len(s.got); i++ {
		longest = max(longest, s.got[i].at.Sub(s.got[i-1].at))
	}
	t.Logf("silence from the last message before the kill to %q: %s (kill to %q: %s); longest silence of the stream: %s; caller timeout %s",
		wire.StatusRestarted, gap.Round(time.Millisecond), wire.StatusRestarted, s.got[restarted].at.Sub(killed).Round(time.Millisecond),
		longest.Round(time.Millisecond), callerTimeout)
}

// partitionOwner is the node of recs that pulls sid's input partition.
func partitionOwner(recs []wire.NodeRecord, sid string, partitions int) string {
	p := wire.Partition(sid, partitions)
	for _, r := range recs {
		for _, q := range r.Partitions {
			if q == p {
				return r.Node
			}
		}
	}
	return ""
}

// agentCaller connects to member i alone (no reconnect elsewhere) with a
// client credential named name, as a caller of the agent protocol would: its
// inbox prefix is the credential's.
func agentCaller(t *testing.T, c *tahtest.Cluster, i int, name string) *nats.Conn {
	t.Helper()
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := trust.EnsureCreds(path, wire.RoleClient, name); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.Layout().Slots[i].URL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox(name)),
		nats.Name("clustertest agent caller"), nats.IgnoreDiscoveredServers(), nats.DontRandomize())
	if err != nil {
		t.Fatalf("connect to node %s as %s: %v", c.ID(i), name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// agentMsg is a message of an agent protocol stream and when it arrived.
type agentMsg struct {
	at    time.Time
	chunk wire.Chunk
	code  string // the error code header, if any
	body  string
	end   bool
}

// agentStream is the response stream of one prompt, read as it arrives.
type agentStream struct {
	t   *testing.T
	in  chan agentMsg
	got []agentMsg
	// killed is when the test killed a node, for the transcript.
	killed time.Time
}

// openAgentStream subscribes to an inbox and sends req to subj with it as
// the reply subject.
func openAgentStream(t *testing.T, nc *nats.Conn, subj string, req []byte) *agentStream {
	t.Helper()
	s := &agentStream{t: t, in: make(chan agentMsg, 4096)}
	inbox := nc.NewRespInbox()
	// The callback runs on the connection's dispatcher, which nc.Close
	// stops; it stamps each message as it arrives.
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		am := agentMsg{at: time.Now()}
		switch {
		case len(m.Data) == 0 && len(m.Header) == 0:
			am.end = true
		case m.Header.Get("Status") == "503":
			am.code, am.body = "503", "no responders: no node serves "+subj+" (is the agent gateway up?)"
		case m.Header.Get(wire.HeaderServiceErrorCode) != "":
			am.code, am.body = m.Header.Get(wire.HeaderServiceErrorCode), string(m.Data)
		default:
			if err := json.Unmarshal(m.Data, &am.chunk); err != nil {
				am.code, am.body = "not a chunk", string(m.Data)
			}
		}
		s.in <- am
	})
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatalf("subscribe to %s: %v", inbox, err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.PublishRequest(subj, inbox, req); err != nil {
		t.Fatalf("prompt %s: %v", subj, err)
	}
	return s
}

// next is the stream's next message; a stream silent for the caller's
// timeout fails the test.
func (s *agentStream) next() agentMsg {
	s.t.Helper()
	m, ok := s.wait(callerTimeout)
	if !ok {
		s.t.Fatalf("the stream was silent for %s (the caller's timeout): %s", callerTimeout, s.transcript())
	}
	return m
}

// wait is the next message within d, if one comes.
func (s *agentStream) wait(d time.Duration) (agentMsg, bool) {
	select {
	case m := <-s.in:
		s.got = append(s.got, m)
		return m, true
	case <-time.After(d):
		return agentMsg{}, false
	}
}

func (s *agentStream) last() agentMsg {
	if len(s.got) == 0 {
		return agentMsg{}
	}
	return s.got[len(s.got)-1]
}

// count is the number of chunks of type typ so far.
func (s *agentStream) count(typ string) int {
	n := 0
	for _, m := range s.got {
		if m.chunk.Type == typ {
			n++
		}
	}
	return n
}

func (s *agentStream) statuses() []string {
	var out []string
	for _, m := range s.got {
		if m.chunk.Type == wire.ChunkStatus {
			d, _ := m.chunk.Data.(string)
			out = append(out, d)
		}
	}
	return out
}

// transcript is the stream so far, with runs of response chunks folded into
// one entry (their count and size) and the time of each entry since the
// first message.
func (s *agentStream) transcript() string {
	var b strings.Builder
	var t0 time.Time
	run, size := 0, 0
	flush := func() {
		if run > 0 {
			fmt.Fprintf(&b, " response×%d (%d bytes),", run, size)
			run, size = 0, 0
		}
	}
	marked := false
	for i, m := range s.got {
		if i == 0 {
			t0 = m.at
		}
		if !s.killed.IsZero() && !marked && m.at.After(s.killed) {
			flush()
			fmt.Fprintf(&b, " [%s] (SIGKILL of the node that runs the turn),", s.killed.Sub(t0).Round(time.Millisecond))
			marked = true
		}
		if m.chunk.Type == wire.ChunkResponse {
			d, _ := m.chunk.Data.(string)
			run, size = run+1, size+len(d)
			continue
		}
		flush()
		at := m.at.Sub(t0).Round(time.Millisecond)
		switch {
		case m.end:
			fmt.Fprintf(&b, " [%s] terminator", at)
		case m.code != "":
			fmt.Fprintf(&b, " [%s] error %s %s,", at, m.code, m.body)
		default:
			fmt.Fprintf(&b, " [%s] %s %v,", at, m.chunk.Type, m.chunk.Data)
		}
	}
	flush()
	return strings.TrimSpace(b.String())
}

// agentText is the concatenated response text of ms since their last
// "restarted" status: what a caller keeps.
func agentText(ms []agentMsg) string {
	var b strings.Builder
	for _, m := range ms {
		switch {
		case m.chunk.Type == wire.ChunkStatus && m.chunk.Data == wire.StatusRestarted:
			b.Reset()
		case m.chunk.Type == wire.ChunkResponse:
			d, _ := m.chunk.Data.(string)
			b.WriteString(d)
		}
	}
	return b.String()
}
