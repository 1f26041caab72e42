package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/gopool"
	"github.com/tah-dev/tah/llm"
)

// Manager owns the session actors of one node: it spawns an actor per session on
// its first command (named by the session id), routes commands to it, and stops
// them all on Close. Beside them, in the same actor system, it owns the one
// tool runner that executes their tool calls.
type Manager struct {
	cfg      Config
	bus      *bus.Bus
	provider llm.Provider
	tools    *Tools
	loop     Loop
	sys      *actor.ActorSystem

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// calls runs the sessions' model calls (askModel), each owned by the
	// step that waits for it; Close stops it after the work.
	calls *gopool.Pool

	mu     sync.Mutex
	closed bool
	actors map[string]*entry

	// deadlines are the approval deadlines this node enforces.
	deadlines deadlines
}

type entry struct {
	pid *actor.PID
	// inflight counts commands sent and not yet received, so that an actor never
	// passivates with a command in its mailbox.
	inflight int
}

// NewManager returns a Manager over b, with a tool runner for the tools tc
// names (a zero ToolConfig: sessions without tools); loop nil means
// DefaultLoop. It fails only when tc is not valid (a negative MaxConcurrent).
func NewManager(cfg Config, b *bus.Bus, provider llm.Provider, tc ToolConfig, loop Loop) (*Manager, error) {
	if loop == nil {
		loop = DefaultLoop{}
	}
	if err := ValidateSubAgents(cfg.SubAgents); err != nil {
		return nil, err
	}
	logger := cfg.logger()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With("component", "actors")
	}))
	tools, err := startTools(sys.Root, tc, logger.With("component", "tools"))
	if err != nil {
		sys.Shutdown()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, bus: b, provider: provider, tools: tools, loop: loop, sys: sys, calls: gopool.New(0),
		ctx: ctx, cancel: cancel, actors: map[string]*entry{}}, nil
}

// Deliver routes cmd to the actor of session sid, spawning it if needed. It never
// blocks on the session's work; cmd.Done reports the outcome.
func (m *Manager) Deliver(sid string, cmd *Command) error {
	if err := event.ValidSessionID(sid); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrStopped
	}
	e := m.actors[sid]
	if e == nil {
		pid, err := m.spawn(sid)
		if err != nil {
			return err
		}
		e = &entry{pid: pid}
		m.actors[sid] = e
		m.active(sid, true)
	}
	e.inflight++
	m.sys.Root.Send(e.pid, cmd)
	return nil
}

// spawn starts the actor named sid. An actor of that name that is still
// stopping holds the name for a moment: wait for it.
func (m *Manager) spawn(sid string) (*actor.PID, error) {
	props := actor.PropsFromProducer(func() actor.Actor { return &sessionActor{m: m, sid: sid, box: &steerBox{}} })
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid, err := m.sys.Root.SpawnNamed(props, sid)
		if err == nil {
			return pid, nil
		}
		if !errors.Is(err, actor.ErrNameExists) || time.Now().After(deadline) {
			return nil, fmt.Errorf("spawn session actor %s: %w", sid, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// received is called by an actor for each command it takes from its mailbox.
func (m *Manager) received(sid string) {
	m.mu.Lock()
	if e := m.actors[sid]; e != nil && e.inflight > 0 {
		e.inflight--
	}
	m.mu.Unlock()
}

// retire unregisters the actor pid of sid so that it can stop: only when no
// command is on its way to it, unless force.
func (m *Manager) retire(sid string, pid *actor.PID, force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.actors[sid]
	if e == nil || !e.pid.Equal(pid) {
		return true
	}
	if e.inflight > 0 && !force {
		return false
	}
	delete(m.actors, sid)
	m.active(sid, false)
	return true
}

// active tells Config.Active that session sid's actor started or stopped;
// m.mu is held, which keeps the calls of a session in order.
func (m *Manager) active(sid string, on bool) {
	if m.cfg.Active != nil {
		m.cfg.Active(sid, on)
	}
}

// StopWhere stops the actors of the sessions for which match is true, as Close
// does for all: running work is cancelled without recording anything more, and
// its command ends with ErrStopped (a node hands those sessions over: their
// inputs go back unacknowledged to the next owner). It waits until the actors
// have stopped, or ctx ends, and returns how many it stopped. New commands for
// those sessions are accepted as usual (they spawn a fresh actor).
func (m *Manager) StopWhere(ctx context.Context, match func(sid string) bool) int {
	m.mu.Lock()
	var pids []*actor.PID
	for sid, e := range m.actors {
		if match(sid) {
			pids = append(pids, e.pid)
			delete(m.actors, sid)
			m.active(sid, false)
		}
	}
	m.mu.Unlock()
	m.disarmDeadlines(match)    // the next owner enforces them
	_ = m.stopActors(ctx, pids) // when ctx ends first, the rest still stop, unwaited for
	return len(pids)
}

// ClaimedElsewhere tells the actor of session sid, if this node has one, that
// a node claimed the session with epoch. An actor whose own epoch is older is a
// stale owner: it stops at once, cancelling its LLM and tool calls, and leaves
// its input unacknowledged. A node calls it for every session.claimed it sees.
func (m *Manager) ClaimedElsewhere(sid string, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.actors[sid]
	if e == nil {
		// A passivated session: whoever claimed it enforces its deadline.
		m.disarmDeadline(sid)
	}
	if e != nil {
		m.sys.Root.Send(e.pid, &claimedElsewhere{epoch: epoch})
	}
}

// IsActive reports whether session sid's actor is alive on this node.
func (m *Manager) IsActive(sid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.actors[sid] != nil
}

// ActiveSessions are the sessions whose actors are alive on this node.
func (m *Manager) ActiveSessions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.actors))
	for sid := range m.actors {
		out = append(out, sid)
	}
	return out
}

// Active is the number of session actors alive on this node.
func (m *Manager) Active() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.actors)
}

func (m *Manager) goTracked(fn func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
}

// stopActors stops the actors pids and waits until each has stopped (its
// Stopping cancelled its work), or ctx ends: an error says which came first.
func (m *Manager) stopActors(ctx context.Context, pids []*actor.PID) error {
	futures := make([]*actor.Future, 0, len(pids))
	for _, pid := range pids {
		futures = append(futures, m.sys.Root.StopFuture(pid))
	}
	for _, f := range futures {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every session actor, cancelling running turns without recording
// anything more (their inputs stay unacknowledged and resume on the next owner),
// waits for their goroutines, then stops the tool runner.
//
// The order matters: once an actor has stopped, its work records nothing
// more, so the "cancelled" results that the runner's stop gives the calls
// still running are never taken for real ones. When the actors do not all stop
// before ctx ends, the runner is left running for that reason.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	pids := make([]*actor.PID, 0, len(m.actors))
	for sid, e := range m.actors {
		pids = append(pids, e.pid)
		m.active(sid, false)
	}
	m.actors = map[string]*entry{}
	m.mu.Unlock()
	m.cancel()
	m.disarmDeadlines(func(string) bool { return true })
	if err := m.stopActors(ctx, pids); err != nil {
		return fmt.Errorf("session manager close: session actors still stopping (the tool runner is left running): %w", err)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }() // ends with the work goroutines, which the stops cancelled
	var errs []error
	select {
	case <-done:
		// The work, and so every model call (each waited for by its
		// step), has ended: the idle workers end now.
		m.calls.Stop()
		m.calls.Wait()
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("session manager close: work still running: %w", ctx.Err()))
	}
	if err := m.tools.stop(ctx); err != nil {
		errs = append(errs, err)
	}
	m.sys.Shutdown()
	return errors.Join(errs...)
}
