package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// discard is the logger of every part: the benchmarks print only their table.
var discard = slog.New(slog.DiscardHandler)

// stack is one node on a fresh embedded server and store, in a temporary
// directory that close removes.
type stack struct {
	dir string
	n   *node.Node

	replies *nats.Subscription
	mu      sync.Mutex
	waiting map[string]chan reply
}

// reply is an outcome and when it arrived.
type reply struct {
	o  wire.Outcome
	at time.Time
}

// stackOpts say how to start a stack.
type stackOpts struct {
	tmp      string        // parent of the stack's directory
	sync     time.Duration // bus.Config.SyncInterval: 0 fsyncs every write
	provider llm.Provider
	session  session.Config
	dir      string // reuse this directory (a restart) instead of a new one
}

// noopTool is the benchmarks' tool: it does nothing and says so.
func noopTool() tools.Catalog {
	return tools.MustRegistry(tools.Func(tools.Spec{Name: "noop", Description: "does nothing", Idempotent: true},
		func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil }))
}

func startStack(ctx context.Context, o stackOpts) (*stack, error) {
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp(o.tmp, "tah-bench-"); err != nil {
			return nil, err
		}
	}
	bcfg := bus.Default()
	bcfg.DataDir, bcfg.Port, bcfg.SyncInterval = dir, -1, o.sync
	scfg := o.session
	scfg.Logger = discard
	if scfg.MaxSteps == 0 {
		scfg.MaxSteps = -1 // the turns here make as many steps as they say
	}
	if scfg.Node == "" {
		scfg.Node = "bench"
	}
	n, err := node.Start(ctx, node.Options{Bus: bcfg, Session: scfg, Provider: o.provider, Tools: noopTool(), Logger: discard})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &stack{dir: dir, n: n, waiting: map[string]chan reply{}}
	s.replies, err = n.Bus.Conn().Subscribe("bench.reply.*", s.onReply)
	if err != nil {
		s.close(ctx, true)
		return nil, err
	}
	return s, nil
}

// close stops the node; remove also deletes its directory.
func (s *stack) close(ctx context.Context, remove bool) error {
	if s.replies != nil {
		_ = s.replies.Unsubscribe()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := s.n.Close(ctx)
	if remove {
		os.RemoveAll(s.dir)
	}
	return err
}

func (s *stack) onReply(m *nats.Msg) {
	at := time.Now()
	sid := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var o wire.Outcome
	if err := json.Unmarshal(m.Data, &o); err != nil {
		o.Failure = "malformed outcome: " + err.Error()
	}
	s.mu.Lock()
	ch := s.waiting[sid]
	delete(s.waiting, sid)
	s.mu.Unlock()
	if ch != nil {
		ch <- reply{o: o, at: at}
	}
}

// pauseProjector stops the node's read model projector, so that a floor's
// events are not projected while the floor is measured, and returns the
// function that starts it again (it picks up where it stopped), and with
// wait waits until it has caught up with the log.
func (s *stack) pauseProjector(ctx context.Context) (resume func(wait bool) error) {
	s.n.Projector.Close()
	return func(wait bool) error {
		p, err := node.StartProjector(ctx, s.n.Bus, s.n.Store, discard)
		if err != nil {
			return err
		}
		s.n.Projector = p // node.Close closes this one
		if !wait {
			return nil
		}
		return s.waitReadModel(ctx)
	}
}

// waitReadModel waits until the read model has applied the whole log.
func (s *stack) waitReadModel(ctx context.Context) error {
	info, err := s.n.Bus.JetStream().Stream(ctx, wire.EventStream)
	if err != nil {
		return err
	}
	return s.n.Projector.WaitFor(ctx, info.CachedInfo().State.LastSeq)
}

// create writes session.created for sid.
func (s *stack) create(ctx context.Context, sid string) error {
	_, err := session.Create(ctx, s.n.Bus, sid, session.Config{MaxSteps: session.DefaultMaxSteps}, nil)
	return err
}

// start publishes a run of text for sid through the input stream, as every
// client does, and returns a channel that gets its outcome.
func (s *stack) start(ctx context.Context, sid, text string) (<-chan reply, error) {
	ch := make(chan reply, 1)
	s.mu.Lock()
	s.waiting[sid] = ch
	s.mu.Unlock()
	in := wire.Input{Command: wire.CommandRun, Text: text, ReplyTo: "bench.reply." + sid}
	if _, err := s.n.Bus.PublishInput(ctx, sid, in); err != nil {
		s.mu.Lock()
		delete(s.waiting, sid)
		s.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

// run runs one turn of sid and waits for its outcome.
func (s *stack) run(ctx context.Context, sid, text string) (wire.Outcome, error) {
	r, err := s.runAt(ctx, sid, text)
	return r.o, err
}

// runAt is run, with the time the outcome arrived.
func (s *stack) runAt(ctx context.Context, sid, text string) (reply, error) {
	ch, err := s.start(ctx, sid, text)
	if err != nil {
		return reply{}, err
	}
	select {
	case r := <-ch:
		if o := r.o; o.Failure != "" || o.Status != "completed" {
			return r, fmt.Errorf("turn of %s: status %s %s %s", sid, o.Status, o.Failure, o.Error)
		}
		return r, nil
	case <-ctx.Done():
		return reply{}, fmt.Errorf("turn of %s: %w", sid, ctx.Err())
	}
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error;
// after an error the remaining indexes are skipped.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
