package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// legacyLog is a log written the way TAH wrote it before shards and records:
// stream TAH_EVT, one event envelope per message on
// tah.sess.<sid>.evt.<type>, fenced per session, with the old message ids.
type legacyLog struct {
	t    *testing.T
	js   jetstream.JetStream
	last map[string]uint64 // per session, the sequence of its last event
	// wrote are each session's events, in order, as written.
	wrote map[string][]event.Event
}

func newLegacyLog(t *testing.T, js jetstream.JetStream) *legacyLog {
	// The nodes that met a log of version 1 had no stream of tenants'
	// inputs or answers, whose subjects overlap the old log's: a node
	// migrates the log before it makes them, but the tests make the shards
	// first.
	for _, s := range []string{wire.TenantInputStream, wire.TenantAnswerStream} {
		if err := js.DeleteStream(ctxT(t), s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatal(err)
		}
	}
	_, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{
		Name: wire.LegacyEventStream, Subjects: []string{wire.LegacyEventSubjects},
		Storage: jetstream.FileStorage, Duplicates: wire.DuplicateWindow, AllowDirect: true,
		MaxMsgsPerSubject: -1, Metadata: map[string]string{wire.MetaSetup: "1", wire.MetaProtocol: "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &legacyLog{t: t, js: js, last: map[string]uint64{}, wrote: map[string][]event.Event{}}
}

// write appends ev to its session, as a version-1 node did; dup stores it a
// second time (the copy a retry around a leader change could leave).
func (l *legacyLog) write(ev event.Event, dup bool) {
	l.t.Helper()
	ev.Time = time.Date(2026, 11, 30, 10, 0, len(l.wrote[ev.Session]), 0, time.UTC)
	body, err := json.Marshal(ev) // the version-1 envelope
	if err != nil {
		l.t.Fatal(err)
	}
	m := nats.NewMsg("tah.sess." + ev.Session + ".evt." + string(ev.Type))
	m.Data = body
	m.Header.Set(wire.HeaderMsgID, fmt.Sprintf("%s:%d:nonce:%d", ev.Session, ev.Epoch, l.last[ev.Session]))
	for range 1 + boolInt(dup) {
		m.Header.Set(hdrExpectLastSubjSeq, fmt.Sprint(l.last[ev.Session]))
		m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", wire.LegacySessionEvents(ev.Session))
		ack, err := l.js.PublishMsg(ctxT(l.t), m)
		if err != nil {
			l.t.Fatal(err)
		}
		l.last[ev.Session] = ack.Sequence
	}
	l.wrote[ev.Session] = append(l.wrote[ev.Session], ev)
}

// session writes n turns of sid (a claim first), interleaved with nothing.
func (l *legacyLog) session(sid string, from, n int) {
	if from == 0 {
		c := claim(sid, 1)
		c.Epoch = 1
		l.write(c, false)
	}
	for i := from; i < from+n; i++ {
		e := turn(sid, i)
		e.Epoch = 1
		l.write(e, i == 2)
	}
}

// logLines collects a logger's messages.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestMigrateLegacyLog: a log of the previous version is copied into the
// shards once, by one of three nodes starting together, resuming a session
// that an interrupted migration had half copied; every session keeps its
// events in order (a duplicate the old stream stored is dropped) and goes on;
// the checkpoints, which counted the old sequences, are gone, and so are the
// old stream and the migration's lock.
func TestMigrateLegacyLog(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	js, _ := jetstream.New(nc)
	// An earlier migration made the shards, copied s_m1 and was interrupted;
	// then s_m1 got more events.
	first := connected(t, srv.ClientURL(), func(c *Config) { c.Shards = 2 })
	old := newLegacyLog(t, js)
	sids := []string{"s_m1", "s_m2", "s_m3", "s_m4"}
	for _, sid := range sids {
		old.session(sid, 0, 3)
	}
	legacy, err := js.Stream(ctxT(t), wire.LegacyEventStream)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := first.copySession(ctxT(t), legacy, "s_m1"); err != nil || n != 4 {
		t.Fatalf("first copy: %d events, %v", n, err)
	}
	old.session("s_m1", 3, 2)
	if _, err := first.checkpoints.Put(ctxT(t), "s_m2", []byte(`{"id":"s_m2","last_seq":7}`)); err != nil {
		t.Fatal(err)
	}

	var logs logLines
	buses := make([]*Bus, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range buses {
		wg.Go(func() {
			cfg := Default()
			cfg.URL, cfg.Partitions = srv.ClientURL(), 4
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			buses[i], errs[i] = Open(ctxT(t), cfg)
		})
	}
	wg.Wait()
	for i, b := range buses {
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		if b.Shards() != 2 {
			t.Fatalf("node %d has %d shards", i, b.Shards())
		}
	}
	if n := logs.count("event log migrated"); n != 1 {
		t.Fatalf("%d migrations, want 1:\n%s", n, strings.Join(logs.lines, ""))
	}
	if _, err := js.Stream(ctxT(t), wire.LegacyEventStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("%s still there: %v", wire.LegacyEventStream, err)
	}
	if _, err := js.KeyValue(ctxT(t), wire.LockBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the lock bucket is still there: %v", err)
	}
	if _, err := buses[0].checkpoints.Get(ctxT(t), "s_m2"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a checkpoint of the old log is still there: %v", err)
	}
	b := buses[1]
	for _, sid := range sids {
		evs, last := mustReplay(t, b, sid, 0)
		want := old.wrote[sid]
		if len(evs) != len(want) {
			t.Fatalf("%s: %d events, want %d", sid, len(evs), len(want))
		}
		for i, ev := range evs {
			w := want[i]
			if ev.Type != w.Type || string(ev.Data) != string(w.Data) || ev.Epoch != w.Epoch || !ev.Time.Equal(w.Time) || ev.Index != 0 ||
				(i > 0 && ev.Seq <= evs[i-1].Seq) {
				t.Fatalf("%s event %d: %+v, want %+v", sid, i, ev, w)
			}
		}
		// and the session goes on
		nw, _ := b.Writer(sid, 2, last)
		mustAppend(t, nw, claim(sid, 2))
	}
	// A node started later finds nothing to migrate.
	late := connected(t, srv.ClientURL())
	if evs, _ := mustReplay(t, late, "s_m3", 0); len(evs) != 5 {
		t.Fatalf("a later node sees %d events", len(evs))
	}
}

// TestMigrationLockHeld: a node that finds the migration's lock held waits
// for its holder (and says who it is), and takes the lock over when it
// disappears with the old log still there (its holder died: the lock
// expired). A client may not migrate and says so.
func TestMigrationLockHeld(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	js, _ := jetstream.New(nc)
	connected(t, srv.ClientURL()) // the shards
	old := newLegacyLog(t, js)
	old.session("s_w", 0, 2)
	locks, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: wire.LockBucket, TTL: wire.LockTTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks.Create(ctxT(t), wire.LogMigrationLock, []byte("a node that died")); err != nil {
		t.Fatal(err)
	}
	client := Default()
	client.URL, client.NoSetup, client.Partitions = srv.ClientURL(), true, 4
	if err := openErr(t, client); !errors.Is(err, ErrNotSetUp) || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("client: %v", err)
	}
	var logs logLines
	cfg := Default()
	cfg.URL, cfg.Partitions = srv.ClientURL(), 4
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	type opened struct {
		b   *Bus
		err error
	}
	done := make(chan opened, 1)
	go func() {
		b, err := Open(ctxT(t), cfg)
		done <- opened{b, err}
	}()
	bustest.Eventually(t, 30*time.Second, "the node waits for the lock's holder", func() bool {
		return logs.count("a node that died") > 0
	})
	if err := locks.Delete(ctxT(t), wire.LogMigrationLock); err != nil {
		t.Fatal(err)
	}
	var o opened
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting node did not take the lock over")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Cleanup(func() { _ = o.b.Close(context.Background()) })
	if evs, _ := mustReplay(t, o.b, "s_w", 0); len(evs) != 3 {
		t.Fatalf("%d events migrated, want 3", len(evs))
	}
}
