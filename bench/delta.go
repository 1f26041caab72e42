package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// DeltaResult is row 5: from the moment the provider hands a token to TAH to
// the moment a subscriber in another process, connected over TCP, has it.
type DeltaResult struct {
	Tokens        int           `json:"tokens"`
	TokensPerStep int           `json:"tokens_per_llm_step"`
	Pace          time.Duration `json:"pace_ns"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	Max           time.Duration `json:"max_ns"`
	// FirstP50 is the median latency of the first token of each LLM step,
	// which waits for the llm.streaming append.
	FirstP50 time.Duration `json:"first_token_p50_ns"`
	Lost     int           `json:"lost"`
	// The floor: the same number of messages of the same size and headers,
	// published on the same subject at the same pace straight on the node's
	// connection.
	FloorP50 time.Duration `json:"floor_p50_ns"`
	FloorP99 time.Duration `json:"floor_p99_ns"`
}

// deltaScenario is row 5 on a node with the default durability: turns
// streaming tokens, and a subscriber of their deltas in another process.
type deltaScenario struct {
	cfg Config
	p   *probe
	st  *stack
	sub *subscriber
	// before is how many deltas the first turn streamed (not counted).
	before int
}

const (
	deltaSession = "s_delta"
	// deltaPerStep is how many tokens an LLM step streams.
	deltaPerStep = 100
	// deltaFloorBase is the first delta sequence of the floor's messages,
	// far above the node's.
	deltaFloorBase = 1 << 40
)

func (s *deltaScenario) Name() string {
	return fmt.Sprintf("row 5: %d token deltas to a subscriber in another process", s.cfg.DeltaTokens)
}

// tokens are the tokens of an LLM step.
func (s *deltaScenario) tokens() []string {
	tokens := make([]string, deltaPerStep)
	for i := range tokens {
		tokens[i] = "tok" + strconv.Itoa(i) + " "
	}
	return tokens
}

// want is how many deltas the measured turns stream.
func (s *deltaScenario) want() int { return s.turns() * deltaPerStep }

func (s *deltaScenario) turns() int { return max(1, s.cfg.DeltaTokens/deltaPerStep) }

// Setup starts the node, runs a first turn (it spawns and claims the
// session; its deltas are not counted) and starts the subscriber.
func (s *deltaScenario) Setup(ctx context.Context, env Env) error {
	final := mock.Scripted(mock.Stream(s.tokens()...).Paced(s.cfg.DeltaPace).Always())
	s.p = newProbe(final, final, true)
	var err error
	if s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: 0, provider: s.p}); err != nil {
		return err
	}
	if err := s.st.create(ctx, deltaSession); err != nil {
		return err
	}
	if _, _, err := s.st.run(ctx, deltaSession, input(deltaSession, 0)); err != nil {
		return err
	}
	for _, c := range s.p.take(deltaSession) {
		s.before += len(c.deltas)
	}
	l := s.st.c.Layout()
	spec := fmt.Sprintf("%s,%s,%d", l.Slots[0].URL(), deltaSession, 2*s.want())
	s.sub, err = startSubscriber(ctx, s.cfg.Executable, spec, l.Creds)
	return err
}

func (s *deltaScenario) Teardown(context.Context) error {
	s.sub.stop()
	s.st.close()
	return nil
}

// Run streams the measured turns, then the floor: the same number of
// messages of the same size and headers, published on the same subject at
// the same pace straight on the node's connection.
func (s *deltaScenario) Run(ctx context.Context, rep *Report) error {
	for range s.turns() {
		if _, _, err := s.st.run(ctx, deltaSession, input(deltaSession, 0)); err != nil {
			return err
		}
	}
	var emitted []time.Time
	first := map[int]bool{}
	for _, c := range s.p.take(deltaSession) {
		first[len(emitted)] = true
		emitted = append(emitted, c.deltas...)
	}
	floorSent, err := s.floor()
	if err != nil {
		return err
	}
	got, err := s.sub.results()
	if err != nil {
		return err
	}
	res := &DeltaResult{Tokens: s.want(), TokensPerStep: deltaPerStep, Pace: s.cfg.DeltaPace}
	var all, firsts sample
	for i, t := range emitted {
		at, ok := got[uint64(s.before+i+1)]
		if !ok {
			res.Lost++
			continue
		}
		d := time.Duration(at - t.UnixNano())
		all = append(all, d)
		if first[i] {
			firsts = append(firsts, d)
		}
	}
	res.P50, res.P99, res.Max = all.p50(), all.p99(), all.pct(100)
	res.FirstP50 = firsts.p50()
	var floor sample
	for i, t := range floorSent {
		if at, ok := got[deltaFloorBase+uint64(i)]; ok {
			floor = append(floor, time.Duration(at-t.UnixNano()))
		}
	}
	res.FloorP50, res.FloorP99 = floor.p50(), floor.p99()
	rep.Delta = res
	return nil
}

// floor publishes the floor's deltas and returns when each went.
func (s *deltaScenario) floor() ([]time.Time, error) {
	tokens := s.tokens()
	sent := make([]time.Time, s.want())
	nc := s.st.node().Bus().Conn()
	for i := range sent {
		body, _ := json.Marshal(wire.Delta{StepID: "llm1.1", Delta: llm.Delta{Text: tokens[i%deltaPerStep]}})
		m := &nats.Msg{Subject: wire.DeltaSubject(deltaSession), Data: body, Header: nats.Header{
			wire.HeaderEpoch: []string{"1"}, wire.HeaderDeltaSeq: []string{strconv.FormatUint(deltaFloorBase+uint64(i), 10)}}}
		time.Sleep(s.cfg.DeltaPace)
		sent[i] = time.Now()
		if err := nc.PublishMsg(m); err != nil {
			return nil, err
		}
	}
	return sent, nil
}
