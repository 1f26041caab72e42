package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// AgentResult is row 11: a turn over the Synadia Agent Protocol (package
// agents, the gateway tah-node runs) against the model's own time and
// against the same turn through TAH's own client (client.Run). Each path's
// floors are the model's times in that path's turns, as the probe saw them.
type AgentResult struct {
	// Prompts is the measured turns of each path, after one warm-up turn.
	Prompts int `json:"prompts"`
	// The model: Tokens streamed, the first FirstToken after the call
	// began, then one every Pace.
	Tokens     int           `json:"tokens"`
	FirstToken time.Duration `json:"first_token_ns"`
	Pace       time.Duration `json:"pace_ns"`
	Durability string        `json:"durability"`
	// New is a prompt to the controller (agents.prompt.tah.<owner>.new),
	// each to a new session; Continue a prompt to one session's instance
	// (agents.prompt.tah.<owner>.<sid>).
	New      *AgentPath `json:"new"`
	Continue *AgentPath `json:"continue"`
	// ClientNew is client.Create then client.Run, each a new session;
	// ClientContinue client.Run on one session: the same turns through
	// TAH's own client (WithDeltas, the equivalent of a response stream).
	ClientNew      *AgentPath `json:"client_new"`
	ClientContinue *AgentPath `json:"client_continue"`
}

// AgentPath is one way of running row 11's turns: the times from the
// caller's first move (the subscription, then the publish; client.Run or
// client.Create for the client's paths) to each point of the turn, median
// and 95th percentile, and the model's own times in those turns.
type AgentPath struct {
	Via   string `json:"via"`
	Turns int    `json:"turns"`
	// Ack is the ack status chunk (the agent protocol only).
	AckP50 time.Duration `json:"ack_p50_ns,omitempty"`
	AckP95 time.Duration `json:"ack_p95_ns,omitempty"`
	// First is the first response chunk (a delta for the client).
	FirstP50 time.Duration `json:"first_p50_ns"`
	FirstP95 time.Duration `json:"first_p95_ns"`
	// End is the terminator (the outcome for the client).
	EndP50 time.Duration `json:"end_p50_ns"`
	EndP95 time.Duration `json:"end_p95_ns"`
	// ModelFirstP50 and ModelWholeP50 are the floors: from the model call's
	// start to its first token, and to its end.
	ModelFirstP50 time.Duration `json:"model_first_p50_ns"`
	ModelWholeP50 time.Duration `json:"model_whole_p50_ns"`
}

// FirstRatio is the first chunk's time over the model's time to its first
// token; EndRatio the end's over the model's whole time.
func (p *AgentPath) FirstRatio() float64 {
	return float64(p.FirstP50) / float64(max(p.ModelFirstP50, 1))
}

func (p *AgentPath) EndRatio() float64 { return float64(p.EndP50) / float64(max(p.ModelWholeP50, 1)) }

// OverClient is the agent protocol's end-to-end time over TAH's own
// client's, for new sessions and for a continued one.
func (a *AgentResult) OverClient() (newSessions, continued float64) {
	if a.New == nil || a.ClientNew == nil || a.Continue == nil || a.ClientContinue == nil {
		return 0, 0
	}
	return float64(a.New.EndP50) / float64(max(a.ClientNew.EndP50, 1)), float64(a.Continue.EndP50) / float64(max(a.ClientContinue.EndP50, 1))
}

// targetAgentOverClient is ours, not an issue's: a turn over the agent
// protocol should cost at most a tenth more than the same turn through
// TAH's own client, since both wait for the same durable writes and model.
const targetAgentOverClient = 1.1

// The model of row 11: a streamed answer whose own time is known, short
// enough that the row runs in seconds and long enough that the model, not
// TAH, is most of a turn as with a real one.
const (
	agentTokens     = 20
	agentFirstToken = 50 * time.Millisecond
	agentPace       = 5 * time.Millisecond
)

// agentCaller is the name of row 11's caller credential (role client); its
// inboxes are _INBOX_<name>., as the credential allows.
const agentCaller = "bench-caller"

// agentScenario is row 11: one node with its agent gateway (the harness
// starts it as tah-node does), a caller of the protocol on a connection of
// its own with a client credential, and the bench's client.
type agentScenario struct {
	cfg   Config
	p     *probe
	st    *stack
	nc    *nats.Conn // the caller's
	owner string
	dir   string // the caller's credential
	agSid string // the session the agent protocol's prompts continue
	clSid string // the session client.Run continues
}

func (s *agentScenario) Name() string {
	return fmt.Sprintf("row 11: a turn over the agent protocol, %d turns of each path", s.cfg.AgentPrompts)
}

func (s *agentScenario) Setup(ctx context.Context, env Env) error {
	tokens := make([]string, agentTokens)
	for i := range tokens {
		tokens[i] = "tok" + strconv.Itoa(i) + " "
	}
	model := mock.Scripted(mock.Stream(tokens...).After(agentFirstToken).Paced(agentPace).Always())
	s.p = newProbe(model, model, true)
	var err error
	if s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: 0, provider: s.p}); err != nil {
		return err
	}
	if s.st.node().Gateway() == nil {
		return errors.New("the node runs no agent gateway: node.Start logged why in the harness's log (-log FILE)")
	}
	cfg := s.st.c.Config(0)
	s.owner = cfg.Agents.Owner
	if s.nc, err = s.connectCaller(cfg.DataDir); err != nil {
		return err
	}
	// A warm-up turn each way (the controller; client.Create and Run): they
	// make the sessions the continued paths use, have the session's agent
	// instance registered, and pay for the first of everything.
	if _, s.agSid, err = s.prompt(ctx, wire.AgentController, "warm-agent"); err != nil {
		return fmt.Errorf("warm-up prompt: %w", err)
	}
	if err := s.waitInstance(ctx, s.agSid); err != nil {
		return err
	}
	if _, s.clSid, err = s.clientTurn(ctx, "", "warm-client"); err != nil {
		return fmt.Errorf("warm-up client turn: %w", err)
	}
	s.p.reset()
	env.Note("continuing %s (agent protocol) and %s (client.Run)", s.agSid, s.clSid)
	return nil
}

// connectCaller connects as a caller of the protocol would: plain nats.go,
// a credential of role client issued from the node's trust material, its
// own inbox prefix.
func (s *agentScenario) connectCaller(dataDir string) (*nats.Conn, error) {
	trust, err := auth.Load(dataDir)
	if err != nil {
		return nil, fmt.Errorf("the node's trust material: %w", err)
	}
	if s.dir, err = os.MkdirTemp(s.cfg.Tmp, "bench-agent-"); err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, agentCaller+".creds")
	if err := trust.EnsureCreds(path, wire.RoleClient, agentCaller); err != nil {
		return nil, fmt.Errorf("the caller's credential: %w", err)
	}
	nc, err := nats.Connect(s.st.node().Bus().ClientURL(), nats.UserCredentials(path), nats.Name("tah-bench agent caller"),
		nats.CustomInboxPrefix(wire.CredentialInbox(agentCaller)))
	if err != nil {
		return nil, fmt.Errorf("the caller's connection with %s: %w", path, err)
	}
	return nc, nil
}

// waitInstance waits until session sid's instance answers its status
// subject: the gateway registers it once the session's actor runs, after the
// turn that started it.
func (s *agentScenario) waitInstance(ctx context.Context, sid string) error {
	subj := wire.AgentSubject(wire.AgentVerbStatus, s.owner, sid)
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, last = s.nc.RequestWithContext(rctx, subj, nil)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("session %s's agent instance did not answer %s within 30 s: %w", sid, subj, last)
}

// agentTimes are the moments of one turn, from the caller's first move.
type agentTimes struct {
	ack, first, end time.Duration
}

// prompt sends the prompt of key (the probe books the model's call to it)
// to instance name (the controller, or a session's) and reads its response
// stream to the terminator. It returns the times and the session: the one
// the controller's stream named, or name.
func (s *agentScenario) prompt(ctx context.Context, name, key string) (agentTimes, string, error) {
	var at agentTimes
	sid := name
	body, err := json.Marshal(wire.Envelope{Prompt: input(key, 0)})
	if err != nil {
		return at, "", err
	}
	subj := wire.AgentSubject(wire.AgentVerbPrompt, s.owner, name)
	begin := time.Now()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return at, "", err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(subj, inbox, body); err != nil {
		return at, "", err
	}
	for ctx.Err() == nil {
		// The protocol's inactivity timeout: the stream says something
		// (a keep-alive at worst) every 20 s.
		m, err := sub.NextMsg(60 * time.Second)
		now := time.Since(begin)
		switch {
		case err != nil:
			return at, "", fmt.Errorf("the stream of %s (key %s): %w", subj, key, err)
		case m.Header.Get("Status") == "503":
			return at, "", fmt.Errorf("%s: no responders (is the instance registered?)", subj)
		case m.Header.Get(wire.HeaderServiceErrorCode) != "":
			return at, "", fmt.Errorf("%s (key %s): error %s %s", subj, key, m.Header.Get(wire.HeaderServiceErrorCode), m.Data)
		case len(m.Data) == 0 && len(m.Header) == 0:
			at.end = now
			if at.ack == 0 || at.first == 0 {
				return at, "", fmt.Errorf("%s (key %s): the terminator before the ack or the first response chunk", subj, key)
			}
			return at, sid, nil
		}
		var ch wire.Chunk
		if err := json.Unmarshal(m.Data, &ch); err != nil {
			return at, "", fmt.Errorf("%s: a chunk that is not JSON: %q", subj, m.Data)
		}
		data, _ := ch.Data.(string)
		named, isSession := strings.CutPrefix(data, wire.StatusSessionPrefix)
		switch {
		case ch.Type == wire.ChunkStatus && data == wire.StatusAck && at.ack == 0:
			at.ack = now
		case ch.Type == wire.ChunkStatus && isSession:
			sid = named
		case ch.Type == wire.ChunkResponse && data != "" && at.first == 0:
			at.first = now
		}
	}
	return at, "", ctx.Err()
}

// clientTurn runs the same turn through the bench's client: on session sid,
// or on a new session created first (sid empty), asking for its deltas. It
// returns the times from client.Create (or client.Run) to the first delta
// and to the outcome, and the session.
func (s *agentScenario) clientTurn(ctx context.Context, sid, key string) (agentTimes, string, error) {
	var at agentTimes
	begin := time.Now()
	if sid == "" {
		rep, err := s.st.cl.Create(ctx, wire.CreateRequest{})
		if err != nil {
			return at, "", fmt.Errorf("create: %w", err)
		}
		sid = rep.Session
	}
	t, err := s.st.cl.Run(ctx, sid, wire.Input{Text: input(key, 0)}, client.WithDeltas())
	if err != nil {
		return at, "", fmt.Errorf("run %s: %w", sid, err)
	}
	defer t.Close()
	deltas, decided := t.Deltas(), t.Decided()
	for at.first == 0 || at.end == 0 {
		select {
		case d, ok := <-deltas:
			if !ok {
				deltas = nil
				if at.first == 0 {
					return at, "", fmt.Errorf("turn of %s (key %s): no delta", sid, key)
				}
				continue
			}
			if at.first == 0 && d.Text != "" {
				at.first = time.Since(begin)
			}
		case <-decided:
			at.end, decided = time.Since(begin), nil
			o, err := t.Outcome(ctx)
			if err != nil {
				return at, "", fmt.Errorf("turn of %s (key %s): %w", sid, key, err)
			}
			if o.Status != projection.StatusCompleted {
				return at, "", fmt.Errorf("turn of %s (key %s) ended %s: %s", sid, key, o.Status, o.Error)
			}
		case <-ctx.Done():
			return at, "", ctx.Err()
		}
	}
	return at, sid, nil
}

// Run runs the four paths' turns interleaved (a new session over the
// protocol, then through the client, then a continued one each way), so
// that the machine's drifts fall on all four alike.
func (s *agentScenario) Run(ctx context.Context, rep *Report) error {
	// The four paths, in the order each round runs them.
	paths := []func(key string) (agentTimes, string, error){
		func(key string) (agentTimes, string, error) { return s.prompt(ctx, wire.AgentController, key) },
		func(key string) (agentTimes, string, error) { return s.clientTurn(ctx, "", key) },
		func(key string) (agentTimes, string, error) { return s.prompt(ctx, s.agSid, key) },
		func(key string) (agentTimes, string, error) { return s.clientTurn(ctx, s.clSid, key) },
	}
	times, keys := make([][]agentTimes, len(paths)), make([][]string, len(paths))
	for i := range s.cfg.AgentPrompts {
		for k, run := range paths {
			key := fmt.Sprintf("p%d-%d", k, i)
			at, _, err := run(key)
			if err != nil {
				return err
			}
			times[k], keys[k] = append(times[k], at), append(keys[k], key)
		}
	}
	res := &AgentResult{Prompts: s.cfg.AgentPrompts, Tokens: agentTokens, FirstToken: agentFirstToken, Pace: agentPace, Durability: durabilityName(0)}
	via := [4]string{wire.AgentSubject(wire.AgentVerbPrompt, s.owner, wire.AgentController),
		"client.Create, client.Run", wire.AgentSubject(wire.AgentVerbPrompt, s.owner, "<sid>"), "client.Run"}
	for k, dst := range [4]**AgentPath{&res.New, &res.ClientNew, &res.Continue, &res.ClientContinue} {
		p, err := s.path(via[k], times[k], keys[k], k%2 == 0)
		if err != nil {
			return err
		}
		*dst = p
	}
	rep.Agent = res
	return nil
}

// path sums up one path's turns, with the model's times in them (the
// probe's record of each turn's one call, by its key).
func (s *agentScenario) path(via string, times []agentTimes, keys []string, ack bool) (*AgentPath, error) {
	var acks, firsts, ends, modelFirst, modelWhole sample
	for i, at := range times {
		calls := s.p.take(keys[i])
		if len(calls) != 1 || len(calls[0].deltas) == 0 {
			return nil, fmt.Errorf("%s: the turn of key %s made %d model calls (want 1, with deltas)", via, keys[i], len(calls))
		}
		c := calls[0]
		modelFirst = append(modelFirst, c.deltas[0].Sub(c.start))
		modelWhole = append(modelWhole, c.end.Sub(c.start))
		acks, firsts, ends = append(acks, at.ack), append(firsts, at.first), append(ends, at.end)
	}
	p := &AgentPath{Via: via, Turns: len(times), FirstP50: firsts.p50(), FirstP95: firsts.pct(95), EndP50: ends.p50(), EndP95: ends.pct(95),
		ModelFirstP50: modelFirst.p50(), ModelWholeP50: modelWhole.p50()}
	if ack {
		p.AckP50, p.AckP95 = acks.p50(), acks.pct(95)
	}
	return p, nil
}

func (s *agentScenario) Teardown(context.Context) error {
	if s.nc != nil {
		s.nc.Close()
	}
	s.st.close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	return nil
}

// agentRows are row 11 of the table: each path against the model's own
// time, then the protocol against TAH's own client.
func (r *Report) agentRows() []row {
	a := r.Agent
	if a == nil || a.New == nil {
		return nil
	}
	setting := a.Durability
	var out []row
	for _, p := range []struct {
		what string
		p    *AgentPath
	}{
		{fmt.Sprintf("agent protocol, a new session each (`%s`): publish to ack / first response chunk / terminator, p50 (p95)", a.New.Via), a.New},
		{fmt.Sprintf("agent protocol, one session continued (`%s`): publish to ack / first response chunk / terminator, p50 (p95)", a.Continue.Via), a.Continue},
		{"TAH's own client, a new session each (`client.Create`, `client.Run` WithDeltas): to first delta / outcome, p50 (p95)", a.ClientNew},
		{"TAH's own client, one session continued (`client.Run` WithDeltas): to first delta / outcome, p50 (p95)", a.ClientContinue},
	} {
		if p.p == nil {
			continue
		}
		tah := fmt.Sprintf("%s (%s) / %s (%s)", fdur(p.p.FirstP50), fdur(p.p.FirstP95), fdur(p.p.EndP50), fdur(p.p.EndP95))
		if p.p.AckP50 > 0 {
			tah = fmt.Sprintf("%s (%s) / ", fdur(p.p.AckP50), fdur(p.p.AckP95)) + tah
		}
		out = append(out, row{"11", fmt.Sprintf("%s, %d turns", p.what, p.p.Turns), setting, tah,
			fmt.Sprintf("the model's first token %s / its whole answer %s", fdur(p.p.ModelFirstP50), fdur(p.p.ModelWholeP50)),
			fmt.Sprintf("%s / %s", fratio(p.p.FirstRatio()), fratio(p.p.EndRatio())), "", ""})
	}
	newR, contR := a.OverClient()
	if newR > 0 {
		met := newR <= targetAgentOverClient && contR <= targetAgentOverClient
		out = append(out, row{"11", "the agent protocol's terminator over TAH's own client's outcome (p50): new sessions / one session continued", setting,
			fmt.Sprintf("%s / %s", fdur(a.New.EndP50), fdur(a.Continue.EndP50)),
			fmt.Sprintf("client: %s / %s", fdur(a.ClientNew.EndP50), fdur(a.ClientContinue.EndP50)),
			fmt.Sprintf("%s / %s", fratio(newR), fratio(contR)), fmt.Sprintf("≤ %s× (ours, not an issue's)", trimFloat(targetAgentOverClient)),
			metOr(met, fmt.Sprintf("missed: %s× at worst", trimFloat(round2(max(newR, contR))))),
		})
	}
	return out
}

// agentTarget is row 11's line in the targets.
func (r *Report) agentTarget(w func(string, ...any)) {
	a := r.Agent
	if a == nil || a.New == nil {
		return
	}
	newR, contR := a.OverClient()
	w("- **Row 11, a turn over the agent protocol at most %s× the same turn through TAH's own client** (our goal: the agent protocol's issue set no number): the terminator after %s for a new session (client: %s), %s for a continued one (client: %s): %s× and %s×, %s.\n",
		trimFloat(targetAgentOverClient), fdur(a.New.EndP50), fdur(a.ClientNew.EndP50), fdur(a.Continue.EndP50), fdur(a.ClientContinue.EndP50),
		trimFloat(round2(newR)), trimFloat(round2(contR)), metOr(newR <= targetAgentOverClient && contR <= targetAgentOverClient, "**missed**"))
}

// agentAnalysis explains row 11's figures.
func (r *Report) agentAnalysis(w func(string, ...any)) {
	a := r.Agent
	if a == nil || a.New == nil || a.Continue == nil || a.ClientNew == nil || a.ClientContinue == nil {
		return
	}
	w("### The agent protocol\n\n")
	w("The `ack` is the gateway's admission of the prompt: the envelope parsed, the session created (the controller: `session.Create` in the node's process, a durable append of its first event, no request) or, for an instance, nothing more, the `ack` published and flushed, before the input is stored: %s for a new session and %s for a continued one (p50). The input is then stored in `TAH_IN` and the node works on it as on any other; the stream's chunks are published by the node that runs the turn, from the same deltas and events that `client.Run` follows. The first response chunk came %s after the publish for a new session and %s for a continued one, where the model itself took %s to its first token: the difference is the input's durable write, the turn's first record (`turn.started` with `llm.started`, written while the model is asked: its first token is held until the record is acknowledged), and the deltas' hops. The terminator follows `agent.finished`, as the client's outcome does.\n\n",
		fdur(a.New.AckP50), fdur(a.Continue.AckP50), fdur(a.New.FirstP50), fdur(a.Continue.FirstP50), fdur(a.Continue.ModelFirstP50))
	w("Through TAH's own client the first delta came %s (new session) and %s (continued) after the first call: `client.Run` `WithDeltas` asks where the session's log ends and follows it with an ordered consumer before it publishes the input, since it tells its own turn's deltas from the log's `turn.started`; a Turn asked only for its outcome does neither.\n\n",
		fdur(a.ClientNew.FirstP50), fdur(a.ClientContinue.FirstP50))
}
