package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
)

// probe is the provider the node calls in the benchmarks. It hands each call
// to the mock its route picks and records, per session, when the call began
// and ended, how long TAH's own delta callback took inside it, and when each
// delta went out. The benchmarks send "<sid> <n>" as the user's input: the
// session to book the call to, and how many tool steps the turn makes before
// the final answer.
type probe struct {
	route  func(toolSteps, done int) llm.Provider
	record bool

	mu    sync.Mutex
	calls map[string][]call
}

// call is one LLM call as the probe saw it.
type call struct {
	start, end time.Time
	// inTAH is the time spent in TAH's onDelta callback during the call (the
	// llm.streaming append and the delta publishes): not the provider's.
	inTAH  time.Duration
	deltas []time.Time // when each delta was handed to TAH
}

var _ llm.Streamer = (*probe)(nil)

// newProbe routes to tool while the turn has made fewer than its n tool steps,
// then to final. record keeps the calls (off for the memory row).
func newProbe(tool, final llm.Provider, record bool) *probe {
	return &probe{record: record, calls: map[string][]call{},
		route: func(n, done int) llm.Provider {
			if done < n {
				return tool
			}
			return final
		}}
}

func (p *probe) Name() string { return "bench-probe" }

func (p *probe) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	return p.Stream(ctx, req, nil)
}

func (p *probe) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	sid, n, done := turnOf(req.Messages)
	c := call{start: time.Now()}
	var wrapped func(llm.Delta)
	if onDelta != nil {
		wrapped = func(d llm.Delta) {
			t := time.Now()
			if p.record {
				c.deltas = append(c.deltas, t)
			}
			onDelta(d)
			c.inTAH += time.Since(t)
		}
	}
	// The mock streams itself: the call goes to it directly, not through
	// llm.Run again (TAH's call of the probe is one already), so that the
	// harness adds no second context and answer budget to each step's CPU.
	var resp llm.Response
	var err error
	if s, ok := p.route(n, done).(llm.Streamer); ok && wrapped != nil {
		resp, err = s.Stream(ctx, req, wrapped)
	} else {
		resp, err = llm.Run(ctx, p.route(n, done), req, wrapped)
	}
	c.end = time.Now()
	if p.record {
		p.mu.Lock()
		p.calls[sid] = append(p.calls[sid], c)
		p.mu.Unlock()
	}
	return resp, err
}

// take returns and forgets the calls recorded for sid.
func (p *probe) take(sid string) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls[sid]
	delete(p.calls, sid)
	return c
}

// reset forgets every recorded call.
func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = map[string][]call{}
}

// turnOf reads the last user message ("<sid> <n>") and counts the tool
// results after it.
func turnOf(msgs []llm.Message) (sid string, n, done int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		switch m.Role {
		case llm.RoleTool:
			done++
		case llm.RoleUser:
			// Cut, not strings.Fields: the probe runs at every model call,
			// inside the CPU row 2 counts as the node's.
			sid, rest, _ := strings.Cut(strings.TrimSpace(m.Content), " ")
			n, _ = strconv.Atoi(strings.TrimSpace(rest))
			return sid, n, done
		}
	}
	return "", 0, done
}

// input is the user's text that makes session sid run n tool steps.
func input(sid string, n int) string { return sid + " " + strconv.Itoa(n) }

// scriptedMocks returns the two mocks of a turn: one that calls the tool noop
// and one that answers, both after delay, any number of times, keeping no
// copy of the requests (a node's mock keeps none either).
func scriptedMocks(delay time.Duration) (tool, final *mock.Provider) {
	return forgetful(mock.CallTool("noop", `{}`).After(delay).Always()),
		forgetful(mock.Say("done").After(delay).Always())
}

// forgetful is a scripted mock that keeps no copy of the requests.
func forgetful(r mock.Reply) *mock.Provider {
	p, err := mock.New(mock.NewScript(r), mock.WithoutRecording())
	if err != nil {
		panic(err) // a reply of this file's that does not validate
	}
	return p
}

// quiet answers "done" at once and keeps nothing: the memory row uses it,
// since the mock's record of every request would count as the sessions'
// memory.
type quiet struct{}

var _ llm.Provider = quiet{}

func (quiet) Name() string { return "bench-quiet" }

func (quiet) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	return llm.Response{Model: "quiet", Content: "done", FinishReason: llm.FinishStop}, ctx.Err()
}
