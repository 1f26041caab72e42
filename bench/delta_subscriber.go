package bench

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
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// envNATSCreds names the delta subscriber's NATS credential (a .creds file),
// in its environment: the name tah-node reads too.
const envNATSCreds = "TAH_NATS_CREDS"

// subscriberWithin bounds the subscriber process's whole life.
const subscriberWithin = 2 * time.Minute

// deltaRecord is one delta as the subscriber process received it.
type deltaRecord struct {
	Seq uint64 `json:"seq"`
	At  int64  `json:"at_unix_ns"`
}

// DeltaSubscriber is row 5's other process (DeltaSubscriberFlag, spec
// "URL,session,count"): it connects over TCP with the credential of its
// environment (TAH_NATS_CREDS), subscribes to the
// session's deltas, says "ready", and after count deltas (or a minute)
// prints when each arrived, one JSON line each.
func DeltaSubscriber(ctx context.Context, spec string, out io.Writer) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("-%s %q: want URL,session,count", DeltaSubscriberFlag, spec)
	}
	count, err := strconv.Atoi(parts[2])
	if err != nil {
		return fmt.Errorf("-%s %q: count: %w", DeltaSubscriberFlag, spec, err)
	}
	opts := []nats.Option{nats.Name("tah-bench-delta-subscriber")}
	if creds := os.Getenv(envNATSCreds); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(parts[0], opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	var mu sync.Mutex
	recs := make([]deltaRecord, 0, count)
	done := make(chan struct{})
	sub, err := nc.Subscribe(wire.DeltaSubject(parts[1]), func(m *nats.Msg) {
		at := time.Now().UnixNano()
		seq, _ := strconv.ParseUint(m.Header.Get(wire.HeaderDeltaSeq), 10, 64)
		mu.Lock()
		defer mu.Unlock()
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
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	select {
	case <-done:
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	if err := sub.Unsubscribe(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return w.Flush()
}

// subscriber is the parent's side of the subscriber process.
type subscriber struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	lines  *bufio.Scanner
	waited bool
}

// startSubscriber starts exe as the delta subscriber of spec and waits
// until it says it is ready.
func startSubscriber(ctx context.Context, exe, spec, creds string) (*subscriber, error) {
	cctx, cancel := context.WithTimeout(ctx, subscriberWithin)
	s := &subscriber{cancel: cancel, cmd: exec.CommandContext(cctx, exe, "-"+DeltaSubscriberFlag, spec)}
	s.cmd.Env = append(os.Environ(), envNATSCreds+"="+creds)
	s.cmd.Stderr = os.Stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("the delta subscriber %s: %w", exe, err)
	}
	s.lines = bufio.NewScanner(out)
	s.lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !s.lines.Scan() || s.lines.Text() != "ready" {
		err := fmt.Errorf("the delta subscriber did not start (%q): %v", s.lines.Text(), s.lines.Err())
		s.stop()
		return nil, err
	}
	return s, nil
}

// results reads what the subscriber received, by delta sequence: when each
// arrived (Unix ns), once it has exited.
func (s *subscriber) results() (map[uint64]int64, error) {
	got := map[uint64]int64{}
	for s.lines.Scan() {
		var r deltaRecord
		if err := json.Unmarshal(s.lines.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("delta subscriber: %q: %w", s.lines.Text(), err)
		}
		got[r.Seq] = r.At
	}
	s.waited = true
	if err := s.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("delta subscriber: %w", err)
	}
	return got, nil
}

// stop kills the process if it still runs and waits for it.
func (s *subscriber) stop() {
	if s == nil {
		return
	}
	if !s.waited {
		_ = s.cmd.Process.Kill() // it may have exited: Wait says nothing new then
		_ = s.cmd.Wait()
		s.waited = true
	}
	s.cancel()
}
