package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// The load and the checkpoint of a session: what an actor starts from (its
// checkpoint and the tail of its log, then its claim before its first
// write) and what it leaves
// for the next load (a checkpoint after work that appended enough events),
// both through the bus's CheckpointStore.

// load loads the session in a goroutine of its own, which reports loaded.
func (s *sessionActor) load(ctx actor.Context) {
	s.loading = true
	lctx, cancel := context.WithCancel(s.m.ctx)
	s.stopLoad = cancel
	self := ctx.Self()
	s.m.goTracked(func() {
		defer cancel()
		a, err := s.m.loadWithRetry(lctx, s.sid)
		s.m.sys.Root.Send(self, &loaded{a: a, err: err})
	})
}

// load rebuilds the session from its checkpoint and the tail of its log, with
// a writer for the next epoch. It writes nothing: the session is claimed
// (claim) only when a command needs to write, so that a command answered from
// the log (a resume or a cancel with nothing to do, a run whose input has
// ended) leaves the log as it was.
func (m *Manager) load(ctx context.Context, sid string) (*AgentContext, error) {
	// One attempt: a stream without a leader (an election after a node died)
	// fails it (bus.lastMsg asks in short tries), and loadWithRetry tries again.
	ctx, cancel := context.WithTimeout(ctx, loadAttempt)
	defer cancel()
	var st projection.State
	from := uint64(1)
	checkpointed := 0 // the events the checkpoint read holds: none without one
	cps := m.bus.CheckpointStore()
	if cps != nil {
		snap, ok, err := cps.Snapshot(ctx, sid)
		switch {
		case err != nil:
			m.cfg.logger().Warn("checkpoint not readable; replaying from the start", "session", sid, "err", err)
		case ok:
			st, from, checkpointed = snap, snap.LastSeq+1, snap.Events
		}
	}
	evs, lastSeq, err := m.bus.Replay(ctx, sid, from)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", sid, err)
	}
	if needsWholeHistory(&st, evs) {
		msgs, err := readHistory(ctx, cps, sid, st.Elided)
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", sid, err)
		}
		if err := st.Restore(msgs); err != nil {
			return nil, fmt.Errorf("load session %s: %w", sid, err)
		}
	}
	if fault := projection.FoldLog(&st, evs); fault != nil {
		// Not this node's to run, ever (a corrupt log) or until it is
		// upgraded (a newer schema): nothing is claimed or written.
		return nil, fmt.Errorf("load session %s: %w", sid, fault)
	}
	if st.ID == "" {
		return nil, fmt.Errorf("session %s: %w", sid, ErrUnknownSession)
	}
	if lastSeq < st.LastSeq {
		lastSeq = st.LastSeq
	}
	epoch := st.Epoch + 1
	w, err := m.bus.Writer(sid, epoch, lastSeq)
	if err != nil {
		return nil, err
	}
	deltas, err := m.bus.Deltas(sid, epoch)
	if err != nil {
		return nil, err
	}
	return &AgentContext{Session: sid, Config: m.configOf(&st), Provider: m.provider, Tools: m.tools.forSession(sid),
		state: &st, bus: m.bus, writer: w, deltas: deltas, segments: cps, log: m.cfg.logger(), now: time.Now, checkpointed: checkpointed, loop: loopName(m.loop),
		counted: countedUse{usage: st.Usage, usd: st.Cost.USD}, calls: m.calls}, nil
}

// claim claims a loaded session for this node: session.claimed with the
// writer's epoch and the current configuration, fenced on the log a's load
// read (another writer's append since fails it with bus.ErrFenced).
func (m *Manager) claim(ctx context.Context, a *AgentContext) error {
	ctx, cancel := context.WithTimeout(ctx, loadAttempt)
	defer cancel()
	prevNode, prevEpoch := a.state.Node, a.state.Epoch // the claim before this one
	if err := a.Append(ctx, event.SessionClaimed, event.SessionClaimedData{Epoch: a.writer.Epoch(), Node: m.cfg.Node, Config: m.configOf(a.state).eventConfig()}); err != nil {
		return fmt.Errorf("claim session %s: %w", a.Session, err)
	}
	a.claimed = true
	if m.cfg.Claimed != nil {
		m.cfg.Claimed(a.Session, a.writer.Epoch(), prevNode, prevEpoch)
	}
	return nil
}

// loadWithRetry loads sid (load), trying again when the log does not answer
// (a stream leader election after a node died), for up to loadPatience. A
// load that still fails for a reason other than an unknown session or a
// faulted log (a *projection.Fault, which no retry cures) wraps
// ErrUnavailable.
func (m *Manager) loadWithRetry(ctx context.Context, sid string) (*AgentContext, error) {
	return m.retryLoad(ctx, sid, nil, false)
}

// acquire claims loaded (claim), loading the session again and retrying when
// another writer appended since its load (a previous owner finishing its
// last append) or the log does not answer, as loadWithRetry does. It
// returns the claimed context: loaded itself, or one loaded again.
func (m *Manager) acquire(ctx context.Context, loaded *AgentContext) (*AgentContext, error) {
	return m.retryLoad(ctx, loaded.Session, loaded, true)
}

// retryLoad loads sid (starting from loaded when it is not nil) and, with
// claim, claims it; see loadWithRetry and acquire.
func (m *Manager) retryLoad(ctx context.Context, sid string, loaded *AgentContext, claim bool) (*AgentContext, error) {
	deadline := time.Now().Add(loadPatience)
	var err error
	for attempt := 0; ; attempt++ {
		a := loaded
		loaded = nil
		if a == nil {
			a, err = m.load(ctx, sid)
		}
		if err == nil && claim {
			if err = m.claim(ctx, a); err != nil {
				a = nil
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil, ErrStopped
		case err == nil || errors.Is(err, ErrUnknownSession) || errors.As(err, new(*projection.Fault)):
			return a, err
		case time.Now().After(deadline) || (errors.Is(err, bus.ErrFenced) && attempt >= 4):
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		m.cfg.logger().Info("session not loaded yet; trying again", "session", sid, "err", err)
		select {
		case <-ctx.Done():
			return nil, ErrStopped
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
}

// loadPatience bounds the retries of a load that meets an unavailable log;
// loadAttempt bounds one attempt.
const (
	loadPatience = 30 * time.Second
	loadAttempt  = 15 * time.Second
)

// checkpoint stores a snapshot of the state in the checkpoint bucket, then
// records it in the log. The state first leaves out what the next requests
// cannot send, kept in segments, and what the loop no longer reads of past
// turns (history.go), so that the snapshot stays the size of a window.
func (m *Manager) checkpoint(ctx context.Context, a *AgentContext) error {
	cps := m.bus.CheckpointStore()
	if cps == nil {
		return nil
	}
	if err := elide(ctx, cps, a); err != nil {
		return err
	}
	a.state.Slim()
	if err := cps.PutSnapshot(ctx, a.Session, a.state); err != nil {
		return err
	}
	return a.Append(ctx, event.CheckpointCreated, event.CheckpointCreatedData{ID: a.NewStepID("cp"), UpToSeq: a.state.LastSeq,
		Bucket: cps.Bucket(), Key: a.Session, Events: a.state.Events})
}

// checkpointAfter writes a checkpoint after work that ended with out, when
// the work appended at least checkpointEvery events since the last one
// (written at last events), so that a resume replays only a short tail of
// the log. It returns the event count of the checkpoint, or -1 when none was
// written. It runs in the work goroutine, which owns a's state.
func (m *Manager) checkpointAfter(ctx context.Context, a *AgentContext, out Outcome, last int) int {
	if out.Fenced || out.Err != nil || a.state.Events-last < m.cfg.checkpointEvery() {
		return -1
	}
	if err := m.checkpoint(context.WithoutCancel(ctx), a); err != nil {
		m.cfg.logger().Error("checkpoint not written: a resume of this session replays more of its log", "session", a.Session, "err", err)
		return -1
	}
	return a.state.Events
}
