package clustertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// reconnectGate is the dialer of the independent tool service's connection:
// while it is shut, every dial fails, so that the service reconnects only
// once the test opens it again: after the restarted node is up and has
// looked for the tool services without finding this one (a reconnect slower
// than the node's start, as with nats.go's default reconnect wait).
type reconnectGate struct {
	mu   sync.Mutex
	shut bool
	d    net.Dialer
}

func (g *reconnectGate) Dial(network, address string) (net.Conn, error) {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut {
		return nil, errors.New("clustertest: the tool service's reconnect is held")
	}
	return g.d.Dial(network, address)
}

func (g *reconnectGate) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
}

// independentWriter is the tool slow_write (not idempotent) served as
// docs/protocol.md ("Tool services", "A service in another language, in
// short") says, with nats.go and its micro package only: none of TAH's own
// tool-service code. Each call is counted; while a hold is set, the calls
// that arrive wait for its release before they finish.
type independentWriter struct {
	nc        *nats.Conn
	gate      *reconnectGate
	kv        jetstream.KeyValue
	svc       micro.Service
	cancelSub *nats.Subscription
	// reconnected receives a value at every reconnect of the connection.
	reconnected chan struct{}

	mu      sync.Mutex
	runs    map[string]int                // "<session>/<call id>" -> executions
	running map[string]context.CancelFunc // call token -> its cancel
	// stored counts the running calls stored as running: a node that
	// takes over finds them.
	stored int
	hold   chan struct{} // non-nil: a new call waits until it is closed
	wg     sync.WaitGroup
}

// plainToken is an id that is its own token.
var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// protocolToken is "token of an id" of docs/protocol.md.
func protocolToken(id string) string {
	if plainToken.MatchString(id) {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// startIndependentWriter connects the service to url with the credential
// file creds named name, and reconnects forever through its gate.
func startIndependentWriter(t *testing.T, url, creds, name string) *independentWriter {
	t.Helper()
	w := &independentWriter{gate: &reconnectGate{}, reconnected: make(chan struct{}, 16),
		runs: map[string]int{}, running: map[string]context.CancelFunc{}}
	nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.CustomInboxPrefix("_INBOX_"+name),
		nats.Name("independent slow_write"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.SetCustomDialer(w.gate),
		// The answers to the calls of a node that died are refused by its
		// restarted server (it never saw those requests): expected, and
		// not worth printing.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case w.reconnected <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // w.close closes it first, once the service is up
	w.nc = nc
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if w.kv, err = js.KeyValue(ctx, "tah_tool_results"); err != nil {
		t.Fatal(err)
	}
	if w.cancelSub, err = nc.Subscribe("tah.tool.cancel.*", w.cancel); err != nil {
		t.Fatal(err)
	}
	w.svc, err = micro.AddService(nc, micro.Config{Name: "tah-tool-slow_write", Version: "1.0.0",
		Metadata: map[string]string{"tah_protocol": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	err = w.svc.AddEndpoint("slow_write", micro.HandlerFunc(w.handle),
		micro.WithEndpointSubject("tah.tool.slow_write"), micro.WithEndpointQueueGroup("tah-tools"),
		micro.WithEndpointMetadata(map[string]string{
			"description": "Writes, slowly, once: running it twice writes twice.",
			"schema":      `{"type": "object"}`,
			"idempotent":  "false",
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w
}

// close stops the service, its calls (released) and its connection.
func (w *independentWriter) close() {
	_ = w.svc.Stop()
	w.release()
	w.mu.Lock()
	for _, cancel := range w.running {
		cancel()
	}
	w.mu.Unlock()
	w.wg.Wait()
	w.gate.set(false)
	w.nc.Close()
}

// toolRequest is the body of a call (docs/protocol.md, "A call").
type toolRequest struct {
	CallID   string          `json:"call_id"`
	Session  string          `json:"session"`
	Tool     string          `json:"tool"`
	Attempt  string          `json:"attempt"`
	Input    json.RawMessage `json:"input"`
	Deadline *time.Time      `json:"deadline"`
}

// toolResult is a result (docs/protocol.md, "Replies and results").
type toolResult struct {
	Output  string `json:"output"`
	IsError bool   `json:"is_error,omitempty"`
	Code    string `json:"code,omitempty"`
}

// handle takes a call: each runs on its own, so that a slow call never holds
// up the others.
func (w *independentWriter) handle(req micro.Request) {
	var r toolRequest
	if err := json.Unmarshal(req.Data(), &r); err != nil || r.CallID == "" {
		_ = req.Error("400", "not a call", nil)
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if r.Deadline != nil {
		ctx, cancel = context.WithDeadline(ctx, *r.Deadline)
	}
	ctx, stop := context.WithCancel(ctx)
	w.mu.Lock()
	w.running[protocolToken(r.CallID)] = stop
	w.runs[r.Session+"/"+r.CallID]++
	hold := w.hold
	w.wg.Add(1)
	w.mu.Unlock()
	go func() { // owned by the service: ends with the call, which close releases
		defer w.wg.Done()
		defer cancel()
		w.run(ctx, req, r, hold)
		w.mu.Lock()
		delete(w.running, protocolToken(r.CallID))
		w.mu.Unlock()
	}()
}

// run is one call: stored running, worked on (until the hold's release, or
// a moment), stored done, then answered.
func (w *independentWriter) run(ctx context.Context, req micro.Request, r toolRequest, hold chan struct{}) {
	session := r.Session
	if session == "" {
		session = "_"
	}
	key := "slow_write." + protocolToken(session) + "." + protocolToken(r.CallID)
	started := time.Now().UTC()
	stored := map[string]any{"call_id": r.CallID, "session": r.Session, "tool": "slow_write", "attempt": r.Attempt,
		"state": "running", "service": "tah-tool-slow_write", "instance": w.svc.Info().ID, "started": started}
	ok := w.put(key, stored)
	if ok {
		w.mu.Lock()
		w.stored++
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.stored--
			w.mu.Unlock()
		}()
	}
	if hold == nil {
		hold = make(chan struct{})
		close(hold)
	}
	res := toolResult{Output: "written"}
	select {
	case <-hold:
		select {
		case <-time.After(100 * time.Millisecond): // the work itself
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		res = toolResult{Output: "Error: cancelled", IsError: true, Code: "cancelled"}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Code = "timeout"
		}
	}
	stored["state"], stored["finished"], stored["result"] = "done", time.Now().UTC(), res
	w.put(key, stored)
	body, _ := json.Marshal(res)
	if res.IsError {
		status := "499"
		if res.Code == "timeout" {
			status = "408"
		}
		_ = req.Error(status, res.Output, body)
		return
	}
	_ = req.Respond(body)
}

// put stores a call, and reports whether it was. A put that fails (the
// server went away) is left: the node then reads the call as its runner
// left it.
func (w *independentWriter) put(key string, v any) bool {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := w.kv.Put(ctx, key, b)
	return err == nil
}

// cancel stops the call a cancel names (docs/protocol.md, "Cancellation").
func (w *independentWriter) cancel(m *nats.Msg) {
	var c struct {
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(m.Data, &c) != nil || c.CallID == "" {
		return
	}
	w.mu.Lock()
	stop := w.running[protocolToken(c.CallID)]
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// holdCalls makes the calls that arrive from now on wait for release.
func (w *independentWriter) holdCalls() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = make(chan struct{})
}

// release lets the held calls finish, and the next ones run at once.
func (w *independentWriter) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hold != nil {
		close(w.hold)
		w.hold = nil
	}
}

// storedRunning is how many running calls are stored as running.
func (w *independentWriter) storedRunning() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stored
}

// executions is how many calls ran, and those that ran more than once.
func (w *independentWriter) executions() (total int, twice []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, n := range w.runs {
		total += n
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ran %d times", key, n))
		}
	}
	return total, twice
}

// TestIndependentToolServiceAfterNodeCrashes: a tool service written from
// docs/protocol.md alone (nats.go's micro package, a tool credential; the
// tool not idempotent) stays up while its node is killed with SIGKILL and
// restarted on the same data directory and port, and reconnects on its own,
// after the node is up again and has looked for it. At each crash half the
// sessions have a call running on the service, and the other half send
// their next turn to the restarted node before the service is back. Every
// session's last request offered the tool, so no call of it ends
// unknown_tool or tool_unavailable: the node waits for the service,
// discovers it when it is back (the periodic refresh is off) and runs the
// calls, each once; the calls that were running get the result the service
// stored.
func TestIndependentToolServiceAfterNodeCrashes(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(slowWriteScript), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, tahtest.Options{Nodes: 1, Pace: time.Millisecond, EditConfig: func(_ int, cfg *config.Config) {
		cfg.Tools.Remote, cfg.Tools.RefreshEvery, cfg.LLM.MockScript = true, 0, script
		// A bound to catch a hang, far above the few seconds the
		// service takes to come back.
		cfg.Tools.ServiceWait = config.Duration(5 * time.Minute)
	}})
	// A tool credential, as `tahctl creds add --role tool --tools slow_write`
	// issues it.
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.RoleUser(wire.RoleTool, "indie-writer", []string{"slow_write"})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "indie-writer.creds")
	if err := os.WriteFile(creds, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	w := startIndependentWriter(t, c.Layout().Slots[0].URL(), creds, "indie-writer")
	cl := newClient(t, c)
	offered(t, c, "slow_write")

	const sessions, kills = 6, 2
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = cl.create()
	}
	busy, idle := sids[:sessions/2], sids[sessions/2:]
	inputs := map[string][]string{}
	round := 0
	send := func(ss []string) {
		t.Helper()
		for _, sid := range ss {
			id := fmt.Sprintf("in_indie_%s_%d", sid, round)
			inputs[sid] = append(inputs[sid], id)
			if _, err := cl.send(sid, id, fmt.Sprintf("write %d", round)); err != nil {
				t.Fatalf("send to %s: %v", sid, err)
			}
		}
	}
	ended := func() {
		t.Helper()
		for _, sid := range sids {
			ins := inputs[sid]
			if len(ins) == 0 {
				continue
			}
			id := ins[len(ins)-1]
			if err := natstest.Poll(3*time.Minute, 100*time.Millisecond, func() error {
				if !c.Audit(sid).InputEnded(id) {
					return fmt.Errorf("turn %s of %s not ended", id, sid)
				}
				return nil
			}); err != nil {
				t.Fatalf("%v\n%s", err, c.LogTail(0, 80))
			}
		}
	}

	// Every session's first turn: its request offers slow_write.
	send(sids)
	ended()
	for k := 1; k <= kills; k++ {
		round++
		// The busy sessions' calls run on the service, held there, each stored
		// as running first (so that the restarted node finds them).
		w.holdCalls()
		send(busy)
		if err := natstest.Poll(time.Minute, 20*time.Millisecond, func() error {
			if n := w.storedRunning(); n < len(busy) {
				return fmt.Errorf("kill %d: %d of %d calls running and stored", k, n, len(busy))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The node dies; the service, still up, cannot reconnect until the
		// node is back and has looked for it.
		w.gate.set(true)
		c.Kill(0)
		c.Start(0)
		send(idle)
		if listed := toolsListed(t, c); listed["slow_write"] {
			t.Fatalf("kill %d: the node lists slow_write before its service could reconnect", k)
		}
		w.gate.set(false)
		select {
		case <-w.reconnected:
		case <-time.After(time.Minute):
			t.Fatalf("kill %d: the tool service did not reconnect", k)
		}
		w.release()
		ended()
	}
	// After the last restart every session's calls reach the service.
	before, _ := w.executions()
	round++
	send(sids)
	ended()
	if after, _ := w.executions(); after-before != sessions {
		t.Errorf("after the last restart %d calls ran, want %d", after-before, sessions)
	}
	checkIndependentCalls(t, c, sids, inputs, w)
}

// toolsListed is the tools the node lists (tah.api.tools), once it answers.
func toolsListed(t *testing.T, c *tahtest.Cluster) map[string]bool {
	t.Helper()
	var listed map[string]bool
	err := natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := c.Bus().Conn().RequestWithContext(ctx, wire.APISubject(wire.EndpointTools), []byte("{}"))
		if err != nil {
			return err
		}
		var r wire.ToolsReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return fmt.Errorf("tools: %w: %s", err, m.Data)
		}
		listed = map[string]bool{}
		for _, s := range r.Tools {
			listed[s.Name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return listed
}

// checkIndependentCalls checks every session's log: each input ended once,
// every call of slow_write has its result at its step, and ran exactly once
// on the service, and none ended unknown_tool or tool_unavailable.
func checkIndependentCalls(t *testing.T, c *tahtest.Cluster, sids []string, inputs map[string][]string, w *independentWriter) {
	t.Helper()
	codes := map[string]int{}
	calls := 0
	for _, sid := range sids {
		rep := c.Audit(sid)
		if probs := rep.CheckInputs(inputs[sid]...); len(probs) > 0 {
			t.Errorf("session %s:\n%s\n%s", sid, probs, rep.Dump())
			continue
		}
		evs, err := c.Log(sid)
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]string{}
		for _, e := range evs {
			switch e.Type {
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
				calls++
				if d.Code != "" || d.Output != "written" {
					t.Errorf("session %s: call %s of %s ended %q: %s", sid, d.CallID, d.Name, d.Code, d.Output)
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
	total, twice := w.executions()
	t.Logf("tool results by code: %v; executions: %d", codes, total)
	for _, s := range twice {
		t.Error(s)
	}
	if total != calls {
		t.Errorf("%d calls in the logs, %d executions on the service", calls, total)
	}
}
