package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// slowWriteScript is the model of TestToolServiceSurvivesNodeCrashes: every
// turn calls slow_write once, then answers.
const slowWriteScript = `{"replies": [
	{"after_tool": false, "times": -1, "tool_calls": [{"name": "slow_write", "arguments": {}}]},
	{"after_tool": true, "times": -1, "text": "written"}
]}`

// executions counts the runs of each call of a tool service, by session and
// call id.
type executions struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *executions) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[key]++
}

func (e *executions) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	sum := 0
	for _, n := range e.n {
		sum += n
	}
	return sum
}

// serveSlowWrite runs the non-idempotent tool slow_write as a tool service of
// this process, over a tool credential, reconnecting to node forever; each
// call takes a moment and is counted.
func serveSlowWrite(t *testing.T, c *tahtest.Cluster) *executions {
	t.Helper()
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.RoleUser(wire.RoleTool, "slow-writer", []string{"slow_write"})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "slow-writer.creds")
	if err := os.WriteFile(creds, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.Layout().Slots[0].URL(), nats.UserCredentials(creds), nats.CustomInboxPrefix(wire.CredentialInbox("slow-writer")),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ex := &executions{n: map[string]int{}}
	slow := tools.Func(tools.Spec{Name: "slow_write", Description: "Writes, slowly, once."}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		info, _ := tools.CallFrom(ctx)
		ex.add(info.Session + "/" + info.ID)
		select {
		case <-time.After(300 * time.Millisecond):
			return tools.Text("written"), nil
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	})
	svc, err := toolservice.Start(context.Background(), nc, toolservice.Config{}, slow)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return ex
}

// TestToolServiceSurvivesNodeCrashes: one node, whose tool service
// (slow_write, not idempotent) connects through it, is killed with SIGKILL
// several times while 20 sessions' turns call the tool, and restarted. The
// service's connection dies with each kill and comes back a moment after the
// node: no call is answered unknown_tool or tool_unavailable, none runs
// twice, every turn ends once, every started call has its result. The
// periodic refresh is off: discovery follows the events alone.
func TestToolServiceSurvivesNodeCrashes(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(slowWriteScript), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, tahtest.Options{Nodes: 1, Pace: time.Millisecond, EditConfig: func(_ int, cfg *config.Config) {
		cfg.Tools.Remote, cfg.Tools.RefreshEvery, cfg.LLM.MockScript = true, 0, script
	}})
	ex := serveSlowWrite(t, c)
	cl := newClient(t, c)
	offered(t, c, "slow_write")

	const sessions, turns, kills = 20, 4, 4
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = cl.create()
	}
	inputs := make([][]string, sessions)
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i, sid := range sids {
		wg.Add(1)
		go func() { // owned by this test; ends with the session's last turn
			defer wg.Done()
			for k := range turns {
				id := fmt.Sprintf("in_crash_%02d_%d", i, k)
				inputs[i] = append(inputs[i], id)
				if _, err := cl.send(sid, id, fmt.Sprintf("write %d", k)); err != nil {
					errs <- fmt.Errorf("send to %s: %w", sid, err)
					return
				}
				if err := natstest.Poll(90*time.Second, 100*time.Millisecond, func() error {
					if !c.Audit(sid).InputEnded(id) {
						return fmt.Errorf("turn %s of %s not ended", id, sid)
					}
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for k := range kills {
		// Kill while calls run: a few more executions than at the last kill.
		seen := ex.total()
		if err := natstest.Poll(60*time.Second, 20*time.Millisecond, func() error {
			if ex.total() < seen+3 {
				return fmt.Errorf("kill %d: calls not running yet", k+1)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c.Kill(0)
		c.Start(0)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkToolCrashes(t, c, sids, inputs, ex)
}

// checkToolCrashes checks every session's log after the crashes.
func checkToolCrashes(t *testing.T, c *tahtest.Cluster, sids []string, inputs [][]string, ex *executions) {
	t.Helper()
	codes := map[string]int{}
	unknownOffered := 0 // the scripted model calls slow_write even when a restarted node did not offer it yet
	for i, sid := range sids {
		rep := c.Audit(sid)
		if probs := rep.CheckInputs(inputs[i]...); len(probs) > 0 {
			t.Errorf("session %s:\n%s\n%s", sid, probs, rep.Dump())
			continue
		}
		evs, err := c.Log(sid)
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]string{}
		offeredTo := map[string][]string{} // LLM step -> the tools its request offered
		offeredFor := map[string]bool{}    // call -> whether its request offered slow_write
		for _, e := range evs {
			switch e.Type {
			case event.LLMStarted:
				d, _ := event.DecodeAs[event.LLMStartedData](e)
				offeredTo[d.StepID] = d.Tools
			case event.LLMCompleted:
				d, _ := event.DecodeAs[event.LLMCompletedData](e)
				for _, call := range d.Response.Message().ToolCalls {
					offeredFor[call.ID] = slices.Contains(offeredTo[d.StepID], "slow_write")
				}
			case event.ToolStarted:
				d, _ := event.DecodeAs[event.ToolStartedData](e)
				started[d.Call.ID] = d.StepID
			case event.ToolFinished:
				d, _ := event.DecodeAs[event.ToolFinishedData](e)
				if d.StepID == "" || started[d.CallID] != d.StepID {
					t.Errorf("session %s: tool.finished of call %s at step %q, started at %q", sid, d.CallID, d.StepID, started[d.CallID])
				}
				delete(started, d.CallID)
				codes[d.Code]++
				if d.Code == event.CodeUnknownTool && offeredFor[d.CallID] {
					unknownOffered++
				}
			}
		}
		if len(started) > 0 {
			t.Errorf("session %s: calls started and never answered: %v", sid, started)
		}
		st, err := projection.Fold(evs)
		if err == nil {
			err = llm.CheckPairing(st.Messages)
		}
		if err != nil {
			t.Errorf("session %s: %v", sid, err)
		}
	}
	t.Logf("tool results by code: %v; executions: %d", codes, ex.total())
	if unknownOffered > 0 || codes[event.CodeToolUnavailable] > 0 {
		t.Errorf("calls of an offered tool answered unknown_tool (%d) or tool_unavailable (%d)", unknownOffered, codes[event.CodeToolUnavailable])
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for key, n := range ex.n {
		if n > 1 {
			t.Errorf("call %s ran %d times", key, n)
		}
	}
}

// offered waits until the node offers the tool named name (tah.api.tools).
func offered(t *testing.T, c *tahtest.Cluster, name string) {
	t.Helper()
	err := natstest.Poll(60*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := c.Bus().Conn().RequestWithContext(ctx, wire.APISubject(wire.EndpointTools), []byte("{}"))
		if err != nil {
			return err
		}
		var r wire.ToolsReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return err
		}
		for _, s := range r.Tools {
			if s.Name == name {
				return nil
			}
		}
		return fmt.Errorf("%s not offered: %s", name, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
}
