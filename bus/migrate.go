package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// migrateLegacyLog moves a log written by TAH before shards and records (one
// stream, wire.LegacyEventStream, one event per message on
// tah.sess.<sid>.evt.<type>) into the shards, before the Bus serves: each
// session's events, in order, become records of one event on the session's
// shard subject. Then the checkpoints, which counted the old sequences, are
// dropped, and the old stream is removed.
//
// One node migrates: the one that creates the lock key of wire.LockBucket
// first. The others wait until the old stream is gone, and take the lock over
// if its holder stops refreshing it. The migration can be interrupted at any
// point: the next one resumes each session after its last copied event.
func (b *Bus) migrateLegacyLog(ctx context.Context) error {
	for wait := 0; ; wait++ {
		legacy, err := b.legacyLog(ctx)
		if legacy == nil || err != nil {
			return err
		}
		if b.cfg.NoSetup {
			return fmt.Errorf("the event log is stream %s of an older TAH: start a TAH node of this version to migrate it: %w", wire.LegacyEventStream, ErrNotSetUp)
		}
		done, holder, err := b.migrateUnderLock(ctx)
		switch {
		case errors.Is(err, errNoLock):
			// Most likely its holder finished and removed the lock's bucket
			// while this node reached for it: the old stream says.
			b.logInfo("the migration lock could not be taken; trying again while the old log is there", "err", err)
			holder = "the node that migrates it"
		case done || err != nil:
			return err
		case wait%10 == 0:
			b.logInfo("another node migrates the event log; waiting for it", "holder", holder)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to migrate the event log: %w", holder, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// legacyLog returns the old event stream when there is one that TAH made
// (a stream of that name without TAH's metadata is left alone), nil otherwise.
func (b *Bus) legacyLog(ctx context.Context) (jetstream.Stream, error) {
	s, err := b.js.Stream(ctx, wire.LegacyEventStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stream %s: %w", wire.LegacyEventStream, err)
	}
	if _, ok := s.CachedInfo().Config.Metadata[wire.MetaSetup]; !ok {
		return nil, nil
	}
	return s, nil
}

// migrateUnderLock migrates the old log if it gets the lock (done), or
// returns the lock's holder.
func (b *Bus) migrateUnderLock(ctx context.Context) (done bool, holder string, err error) {
	lctx, stop := context.WithTimeout(ctx, lockTry)
	defer stop()
	locks, err := b.ensureKV(lctx, jetstream.KeyValueConfig{Bucket: wire.LockBucket, Description: "TAH locks (the event log's migration)", TTL: wire.LockTTL})
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", errNoLock, err)
	}
	me := lockHolder(b.cfg.Name)
	rev, err := locks.Create(lctx, wire.LogMigrationLock, []byte(me))
	if errors.Is(err, jetstream.ErrKeyExists) {
		if e, gerr := locks.Get(lctx, wire.LogMigrationLock); gerr == nil {
			return false, string(e.Value()), nil
		}
		return false, "another node", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("%w: take %s/%s: %w", errNoLock, wire.LockBucket, wire.LogMigrationLock, err)
	}
	mctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { keepLock(mctx, cancel, locks, me, rev) })
	// Looked up again under the lock: its last holder may have finished.
	legacy, err := b.legacyLog(mctx)
	if legacy != nil && err == nil {
		err = b.migrate(mctx, legacy)
	}
	cancel(nil)
	wg.Wait()
	if cause := context.Cause(mctx); err != nil && errors.Is(cause, errLockLost) {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	if err != nil {
		return false, "", fmt.Errorf("migrating the event log from %s (start a node again to resume it where it stopped): %w", wire.LegacyEventStream, err)
	}
	// The old stream is gone: the lock has done its work (a node waiting on
	// it sees the stream gone first).
	if err := b.js.DeleteKeyValue(ctx, wire.LockBucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		b.logInfo("the migration's lock bucket was not removed", "bucket", wire.LockBucket, "err", err)
	}
	return true, "", nil
}

// errLockLost: the migration's lock expired or was taken over, so another
// node may be migrating too.
var errLockLost = errors.New("the migration lock was lost")

// errNoLock: the migration's lock could not be had (its bucket made, or the
// key created), as when the node that migrated removes the bucket at the
// same time: the caller looks at the old stream again, and tries again
// while it is there.
var errNoLock = errors.New("the migration lock could not be taken")

// lockTry bounds one attempt at the lock, so that a request the removal of
// its bucket leaves unanswered is tried again.
const lockTry = 10 * time.Second

// keepLock refreshes the lock every third of its TTL until ctx ends, and
// cancels the migration with errLockLost when it cannot.
func keepLock(ctx context.Context, cancel context.CancelCauseFunc, locks jetstream.KeyValue, me string, rev uint64) {
	t := time.NewTicker(wire.LockTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		if rev, err = locks.Update(ctx, wire.LogMigrationLock, []byte(me), rev); err != nil && ctx.Err() == nil {
			cancel(fmt.Errorf("%w: %v", errLockLost, err))
			return
		}
	}
}

// lockHolder names this process in the lock: the connection's name, the
// host and the process id, for the log of a node waiting for it.
func lockHolder(name string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s (pid %d)", name, host, os.Getpid())
}

// migrationWorkers is how many sessions are copied at once.
const migrationWorkers = 8

// migrate copies every session of legacy into the shards, drops the
// checkpoints and removes legacy.
func (b *Bus) migrate(ctx context.Context, legacy jetstream.Stream) error {
	// No more writes to the old log: an old node still running fails its
	// appends instead of writing events that the copy would miss.
	if cfg := legacy.CachedInfo().Config; !cfg.Sealed {
		cfg.Sealed = true
		if _, err := b.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("seal %s: %w", wire.LegacyEventStream, err)
		}
	}
	sids, err := legacySessions(ctx, legacy)
	if err != nil {
		return err
	}
	b.logInfo("migrating the event log into shards", "from", wire.LegacyEventStream, "sessions", len(sids),
		"messages", legacy.CachedInfo().State.Msgs, "shards", b.Shards())
	p := &migration{b: b, legacy: legacy, total: len(sids), started: time.Now()}
	if err := p.run(ctx, sids); err != nil {
		return err
	}
	// The checkpoints name sequences of the old log: sessions load from their
	// first record instead, once.
	if err := b.purgeCheckpoints(ctx); err != nil {
		return err
	}
	if err := b.js.DeleteStream(ctx, wire.LegacyEventStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("remove %s after copying it: %w", wire.LegacyEventStream, err)
	}
	b.logInfo("event log migrated", "sessions", len(sids), "events", p.events.Load(), "took", time.Since(p.started).Round(time.Millisecond))
	return nil
}

// purgeCheckpoints removes every checkpoint.
func (b *Bus) purgeCheckpoints(ctx context.Context) error {
	s, err := b.js.Stream(ctx, "KV_"+wire.CheckpointBucket)
	if err == nil {
		err = s.Purge(ctx)
	}
	if err != nil {
		return fmt.Errorf("drop the checkpoints of the old log (%s): %w", wire.CheckpointBucket, err)
	}
	return nil
}

// legacySessions lists the sessions of the old log, sorted.
func legacySessions(ctx context.Context, legacy jetstream.Stream) ([]string, error) {
	info, err := legacy.Info(ctx, jetstream.WithSubjectFilter(wire.LegacyEventSubjects))
	if err != nil {
		return nil, fmt.Errorf("list the sessions of %s: %w", wire.LegacyEventStream, err)
	}
	seen := map[string]bool{}
	for subj := range info.State.Subjects {
		if sid := wire.SessionFromSubject(subj); sid != "" {
			seen[sid] = true
		}
	}
	sids := make([]string, 0, len(seen))
	for sid := range seen {
		sids = append(sids, sid)
	}
	slices.Sort(sids)
	return sids, nil
}

// migration is one run of migrate's copy, with its progress.
type migration struct {
	b       *Bus
	legacy  jetstream.Stream
	total   int
	started time.Time

	sessions, events atomic.Int64
	mu               sync.Mutex
	lastReport       time.Time
}

// run copies sids with migrationWorkers workers; the first error stops them.
func (p *migration) run(ctx context.Context, sids []string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	todo := make(chan string)
	var wg sync.WaitGroup
	for range migrationWorkers {
		wg.Go(func() {
			for sid := range todo {
				n, err := p.b.copySession(ctx, p.legacy, sid)
				if err != nil {
					cancel(fmt.Errorf("session %s: %w", sid, err))
					return
				}
				p.progress(n)
			}
		})
	}
feed:
	for _, sid := range sids {
		select {
		case todo <- sid:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// progress counts a copied session and logs how far the copy got, every few
// seconds.
func (p *migration) progress(events int) {
	done := p.sessions.Add(1)
	total := p.events.Add(int64(events))
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.lastReport) < 5*time.Second && int(done) != p.total {
		return
	}
	p.lastReport = time.Now()
	p.b.logInfo("migrating the event log", "sessions", fmt.Sprintf("%d/%d", done, p.total), "events", total,
		"elapsed", time.Since(p.started).Round(time.Second))
}

// copySession copies session sid's events from legacy into its shard, each
// as a record of one event, after those copied already (by an interrupted
// migration), and returns how many it copied. The message id of a copy is
// "<sid>:v1:<migrator nonce>:<its sequence in the old log>", which says where
// to resume; the copies are fenced like any append, so a second migrator (one
// whose lock expired under it) is fenced rather than copying twice.
func (b *Bus) copySession(ctx context.Context, legacy jetstream.Stream, sid string) (int, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return 0, err
	}
	w, err := b.Writer(sid, 0, 0)
	if err != nil {
		return 0, err
	}
	w.idPrefix = legacyCopyPrefix(sid) + event.NewID("") + ":"
	copied, err := b.copiedUpTo(ctx, w)
	if err != nil {
		return 0, err
	}
	// From the last copied event itself, so that a duplicate the old stream
	// stored after it is recognised (see dropDuplicate), then skipped.
	evs, _, err := b.replayDirect(ctx, legacy, wire.LegacySessionEvents(sid), max(copied, 1))
	if err != nil {
		return 0, fmt.Errorf("read it from %s: %w", wire.LegacyEventStream, err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Seq <= copied {
			continue
		}
		body, err := event.EncodeRecord([]event.Event{ev})
		if err != nil {
			return n, fmt.Errorf("event at %d of %s: %w", ev.Seq, wire.LegacyEventStream, err)
		}
		m := nats.NewMsg(w.subject)
		m.Data = body
		id := w.idPrefix + strconv.FormatUint(ev.Seq, 10)
		seq, err := w.appendOne(ctx, m, func(uint64) string { return id })
		if err != nil {
			return n, fmt.Errorf("copy its event at %d of %s: %w", ev.Seq, wire.LegacyEventStream, err)
		}
		w.last = seq
		n++
	}
	return n, nil
}

// copiedUpTo reads the session's last record in its shard: the sequence in
// the old log of the last event copied (0 when none was), and sets w's last
// sequence to that record's.
func (b *Bus) copiedUpTo(ctx context.Context, w *SessionWriter) (uint64, error) {
	m, err := b.lastMsg(ctx, w.stream, w.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("its last record in %s: %w", w.stream, err)
	}
	id := m.header.Get(wire.HeaderMsgID)
	seq, perr := strconv.ParseUint(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
	if !strings.HasPrefix(id, legacyCopyPrefix(w.sid)) || perr != nil {
		return 0, fmt.Errorf("it has records in %s that no migration wrote (the last one's id is %q): the old log %s cannot be copied after them; remove one of the two",
			w.stream, id, wire.LegacyEventStream)
	}
	w.last = m.seq
	return seq, nil
}

// legacyCopyPrefix starts the message id of every copy of session sid's
// events from the old log.
func legacyCopyPrefix(sid string) string { return sid + ":v1:" }

// logInfo logs to Config.Logger, when there is one.
func (b *Bus) logInfo(msg string, args ...any) {
	if b.cfg.Logger != nil {
		b.cfg.Logger.Info(msg, args...)
	}
}
