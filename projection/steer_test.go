package projection

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

func steerMsg(text string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: text, Steer: true}
}

// A steer joins the running turn's history without starting a turn: the
// turns, their count (as a fork copies them), the turn's text and the
// compaction's transcript treat it as part of the turn; its input is seen.
// The fold refuses a steer between turns or of another turn; the audit
// reports an input that steers twice.
func TestSteerBelongsToItsTurn(t *testing.T) {
	b := newLog(t, "s1", event.Config{})
	b.turn(1, "first")
	b.add(event.TurnSteered, event.TurnSteeredData{Turn: 1, Message: steerMsg("and also"), InputID: "in-s"})
	b.add(event.AgentFinished, event.AgentFinishedData{Turn: 1, Content: "ok"})
	st := b.st
	if len(Turns(st.Messages)) != 1 || countUsers(st.Messages) != 1 || !st.SawInput("in-s") || !st.SteeredTurn("in-s") {
		t.Fatalf("turns %v, count %d, saw %v", Turns(st.Messages), countUsers(st.Messages), st.SawInput("in-s"))
	}
	if tr := compactionTranscript("", st.Messages); !strings.Contains(tr, "User, while the turn ran: and also") || strings.Contains(tr, "Turn 2") {
		t.Fatalf("transcript:\n%s", tr)
	}
	b.turn(2, "second")
	if b.st.SteeredTurn("in-s") || !b.st.SawInput("in-s") {
		t.Fatal("a new turn still counts the last turn's steer as its own")
	}
	if err := Apply(&st, mustEvent(t, event.TurnSteered, event.TurnSteeredData{Turn: 1, Message: steerMsg("late")})); err == nil {
		t.Fatal("a steer between turns folded")
	}
	st = b.st
	if err := Apply(&st, mustEvent(t, event.TurnSteered, event.TurnSteeredData{Turn: 1, Message: steerMsg("old")})); err == nil {
		t.Fatal("a steer of another turn folded")
	}
	b.add(event.TurnSteered, event.TurnSteeredData{Turn: 2, Message: steerMsg("again"), InputID: "in-s"})
	found := false
	for _, p := range Audit(b.events).Problems {
		found = found || strings.Contains(p.What, "input in-s steers turn 2, but it started or steered turn 1 before")
	}
	if !found {
		t.Fatalf("the audit missed a repeated steer: %v", Audit(b.events).Problems)
	}
}
