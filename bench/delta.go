package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// deltaRecord is one delta as the subscriber process received it.
type deltaRecord struct {
	Seq uint64 `json:"seq"`
	At  int64  `json:"at_unix_ns"`
}

// benchDelta measures row 5 on a fresh node with the default durability.
func benchDelta(ctx context.Context, cfg config) (*DeltaResult, error) {
	const perStep = 100
	tokens := make([]string, perStep)
	for i := range tokens {
		tokens[i] = "tok" + strconv.Itoa(i) + " "
	}
	final := mock.Scripted(mock.Stream(tokens...).Paced(cfg.deltaPace).Always())
	p := newProbe(final, final, true)
	st, err := startStack(ctx, stackOpts{tmp: cfg.tmp, sync: 0, provider: p})
	if err != nil {
		return nil, err
	}
	defer st.close(ctx, true)
	const sid = "s_delta"
	if err := st.create(ctx, sid); err != nil {
		return nil, err
	}
	// A first turn spawns and claims the session; its deltas are not counted.
	if _, err := st.run(ctx, sid, input(sid, 0)); err != nil {
		return nil, err
	}
	var before int
	for _, c := range p.take(sid) {
		before += len(c.deltas)
	}
	turns := max(1, cfg.deltaTokens/perStep)
	want := turns * perStep

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, self, "-delta-subscriber", fmt.Sprintf("%s,%s,%d", st.n.Bus.ClientURL(), sid, 2*want))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(out)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		return nil, fmt.Errorf("delta subscriber did not start: %v", lines.Err())
	}
	for range turns {
		if _, err := st.run(ctx, sid, input(sid, 0)); err != nil {
			return nil, err
		}
	}
	var emitted []time.Time
	var first = map[int]bool{}
	for _, c := range p.take(sid) {
		first[len(emitted)] = true
		emitted = append(emitted, c.deltas...)
	}
	// The floor, the same way but without TAH.
	const floorBase = 1 << 40
	floorSent := make([]time.Time, want)
	nc := st.n.Bus.Conn()
	for i := range want {
		body, _ := json.Marshal(wire.Delta{StepID: "llm1.1", Delta: llm.Delta{Text: tokens[i%perStep]}})
		m := &nats.Msg{Subject: wire.DeltaSubject(sid), Data: body, Header: nats.Header{
			wire.HeaderEpoch: []string{"1"}, wire.HeaderDeltaSeq: []string{strconv.FormatUint(floorBase+uint64(i), 10)}}}
		time.Sleep(cfg.deltaPace)
		floorSent[i] = time.Now()
		if err := nc.PublishMsg(m); err != nil {
			return nil, err
		}
	}
	got := map[uint64]int64{}
	for lines.Scan() {
		var r deltaRecord
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("delta subscriber: %q: %w", lines.Text(), err)
		}
		got[r.Seq] = r.At
	}
	waited = true
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("delta subscriber: %w", err)
	}
	res := &DeltaResult{Tokens: want, TokensPerStep: perStep, Pace: cfg.deltaPace}
	var all, firsts sample
	for i, t := range emitted {
		at, ok := got[uint64(before+i+1)]
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
		if at, ok := got[floorBase+uint64(i)]; ok {
			floor = append(floor, time.Duration(at-t.UnixNano()))
		}
	}
	res.FloorP50, res.FloorP99 = floor.p50(), floor.p99()
	return res, nil
}

// deltaSubscriber is the other process of row 5: it subscribes to the
// deltas of a session over TCP, says "ready", and after count deltas (or a
// minute) prints when each arrived, one JSON line each.
func deltaSubscriber(ctx context.Context, spec string, out io.Writer) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("-delta-subscriber %q: want URL,session,count", spec)
	}
	count, err := strconv.Atoi(parts[2])
	if err != nil {
		return err
	}
	nc, err := nats.Connect(parts[0], nats.Name("tah-bench-delta-subscriber"))
	if err != nil {
		return err
	}
	defer nc.Close()
	recs := make([]deltaRecord, 0, count)
	done := make(chan struct{})
	sub, err := nc.Subscribe(wire.DeltaSubject(parts[1]), func(m *nats.Msg) {
		at := time.Now().UnixNano()
		seq, _ := strconv.ParseUint(m.Header.Get(wire.HeaderDeltaSeq), 10, 64)
		if len(recs) < count {
			recs = append(recs, deltaRecord{Seq: seq, At: at})
			if len(recs) == count {
				close(done)
			}
		}
	})
	if err != nil {
		return err
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	select {
	case <-done:
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	sub.Unsubscribe()
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for _, r := range recs[:min(len(recs), count)] {
		enc.Encode(r)
	}
	return w.Flush()
}
