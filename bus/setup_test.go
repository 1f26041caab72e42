package bus

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

func TestSetupIsIdempotent(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b1 := connected(t, srv.ClientURL())
	b2 := connected(t, srv.ClientURL()) // a second node: same setup, nothing to change
	if b1.Shards() != wire.DefaultShards || b2.Shards() != wire.DefaultShards {
		t.Fatalf("shards %d and %d, want %d", b1.Shards(), b2.Shards(), wire.DefaultShards)
	}
	wants := []jetstream.StreamConfig{b2.inputStreamConfig()}
	for k := range b2.Shards() {
		wants = append(wants, b2.shardStreamConfig(k, b2.Shards()))
	}
	for _, want := range wants {
		s, err := b1.js.Stream(ctxT(t), want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if d := streamDiffs(s.CachedInfo().Config, want); len(d) != 0 {
			t.Errorf("%s differs after setup: %v", want.Name, d)
		}
	}
	for p := range b1.cfg.Partitions {
		c, err := b1.in.Consumer(ctxT(t), wire.PartitionConsumer(p))
		if err != nil {
			t.Fatal(err)
		}
		ci := c.CachedInfo().Config
		if ci.PriorityPolicy != jetstream.PriorityPolicyPinned || ci.FilterSubject != wire.PartitionFilter(p) {
			t.Errorf("consumer %d: %+v", p, ci)
		}
	}
	for _, name := range []string{wire.CheckpointBucket, wire.ToolResultBucket, wire.NodeBucket} {
		if _, err := b1.js.KeyValue(ctxT(t), name); err != nil {
			t.Errorf("bucket %s: %v", name, err)
		}
	}
	if _, err := b1.js.ObjectStore(ctxT(t), wire.ArtifactBucket); err != nil {
		t.Errorf("object store: %v", err)
	}
}

func openErr(t *testing.T, cfg Config) error {
	t.Helper()
	b, err := Open(ctxT(t), cfg)
	if err == nil {
		_ = b.Close(context.Background())
	}
	return err
}

func TestSetupRefusesNewerVersion(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b := connected(t, srv.ClientURL())
	cfg := b.shardStreamConfig(3, b.Shards())
	cfg.Metadata[wire.MetaSetup] = "99"
	if _, err := b.js.UpdateStream(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	c := b.cfg
	err := openErr(t, c)
	if !errors.Is(err, ErrIncompatibleSetup) || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("err = %v", err)
	}
}

func TestSetupRefusesForeignStream(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: wire.EventShardStream(0), Subjects: []string{"foo.>"}}); err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.URL = srv.ClientURL()
	if err := openErr(t, cfg); !errors.Is(err, ErrIncompatibleSetup) {
		t.Fatalf("err = %v", err)
	}
}

func TestNoSetupNeedsTheStreams(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	cfg := Default()
	cfg.URL = srv.ClientURL()
	cfg.NoSetup = true
	if err := openErr(t, cfg); !errors.Is(err, ErrNotSetUp) {
		t.Fatalf("bare server: err = %v", err)
	}
	cfg.NoSetup = false
	connected(t, srv.ClientURL(), func(c *Config) { *c = cfg })
	cfg.NoSetup = true
	connected(t, srv.ClientURL(), func(c *Config) { *c = cfg }) // checks pass now
	cfg.Partitions = 8
	if err := openErr(t, cfg); !errors.Is(err, ErrIncompatibleSetup) {
		t.Fatalf("other partition count: err = %v", err)
	}
}

// TestSetupShardCount: the shard count is fixed by the node that creates the
// log; a node configured with another count is refused with what to do, and
// one that does not say (0) takes the log's.
func TestSetupShardCount(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b := connected(t, srv.ClientURL(), func(c *Config) { c.Shards = 3 })
	if b.Shards() != 3 {
		t.Fatalf("shards %d", b.Shards())
	}
	for k := range 3 {
		s, err := b.js.Stream(ctxT(t), wire.EventShardStream(k))
		if err != nil || s.CachedInfo().Config.Metadata[wire.MetaShards] != "3" || s.CachedInfo().Config.Subjects[0] != wire.ShardSubjects(k) {
			t.Fatalf("shard %d: %v", k, err)
		}
	}
	other := b.cfg
	other.Shards = 8
	if err := openErr(t, other); !errors.Is(err, ErrIncompatibleSetup) || !strings.Contains(err.Error(), "start every node with 3") {
		t.Fatalf("8 shards: err = %v", err)
	}
	if _, err := b.js.Stream(ctxT(t), wire.EventShardStream(3)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("a refused node made shard 3: %v", err)
	}
	adopt := b.cfg
	adopt.Shards = 0
	if a := connected(t, srv.ClientURL(), func(c *Config) { *c = adopt }); a.Shards() != 3 {
		t.Fatalf("a node without a count has %d shards", a.Shards())
	}
	adopt.NoSetup = true
	if a := connected(t, srv.ClientURL(), func(c *Config) { *c = adopt }); a.Shards() != 3 || a.ShardOf("s_x") != b.ShardOf("s_x") {
		t.Fatalf("a client has %d shards", a.Shards())
	}
}

func TestSetupChangesPartitionsOnlyWhenDrained(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b := connected(t, srv.ClientURL(), func(c *Config) { c.Partitions = 4 })
	// Grow to 8 with nothing pending: updated in place.
	b8 := connected(t, srv.ClientURL(), func(c *Config) { c.Partitions = 8 })
	si, err := b.js.Stream(ctxT(t), wire.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := si.CachedInfo().Config.SubjectTransform.Destination; got != wire.InputTransform(8) {
		t.Fatalf("transform = %s", got)
	}
	if _, err := b8.in.Consumer(ctxT(t), wire.PartitionConsumer(7)); err != nil {
		t.Fatalf("consumer of partition 7: %v", err)
	}
	// With an input pending, shrinking is refused with a message saying what to do.
	if _, err := b8.PublishInput(ctxT(t), "s_pending", wire.Input{Command: wire.CommandResume}); err != nil {
		t.Fatal(err)
	}
	shrink := b.cfg
	shrink.Partitions = 2
	err = openErr(t, shrink)
	if !errors.Is(err, ErrIncompatibleSetup) || !strings.Contains(err.Error(), "partitions") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Default()
	if err := ok.Validate(); err != nil {
		t.Fatalf("Default: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"no data dir":       func(c *Config) { c.DataDir = "" },
		"replicas 2":        func(c *Config) { c.Replicas = 2 },
		"replicas 3 alone":  func(c *Config) { c.Replicas = 3 },
		"zero partitions":   func(c *Config) { c.Partitions = 0 },
		"negative shards":   func(c *Config) { c.Shards = -1 },
		"bad port":          func(c *Config) { c.Port = 70000 },
		"negative sync":     func(c *Config) { c.SyncInterval = -1 },
		"short pinned ttl":  func(c *Config) { c.InputPinnedTTL = 1 },
		"no append timeout": func(c *Config) { c.AppendTimeout = 0 },
	} {
		c := Default()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ext := Default()
	ext.URL, ext.DataDir, ext.Replicas = "nats://127.0.0.1:4222", "", 3
	if err := ext.Validate(); err != nil {
		t.Errorf("external R3: %v", err)
	}
}

// TestSetupReplacesInputConsumersKeptOnFile: the partitions' consumers (here at R3)
// an older version set up with their state on file are made again with it
// in memory (the server cannot change that of a consumer); the inputs
// waiting stay in TAH_IN, and one delivered and not acknowledged is
// delivered again to the new consumer.
func TestSetupReplacesInputConsumersKeptOnFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three-server cluster: not in -short")
	}
	c := natstest.Start(t, 3)
	r3 := func(cfg *Config) { cfg.Replicas, cfg.Partitions = 3, 2 }
	b1 := connected(t, c.URLs(), r3)
	keepInputConsumersOnFile(t, b1) // as an older version set them up
	held := &inbox{}                // delivers, never acknowledges
	hc, err := b1.ConsumeInputs(ctxT(t), held.handle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b1.PublishInput(ctxT(t), "s_held", wire.Input{ID: "in_held", Command: wire.CommandRun, Text: "held"}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the first input delivered", func() bool { return held.len() == 1 })
	hc.Stop()
	if _, err := b1.PublishInput(ctxT(t), "s_waiting", wire.Input{ID: "in_waiting", Command: wire.CommandRun, Text: "waiting"}); err != nil {
		t.Fatal(err)
	}

	b2 := connected(t, c.URLs(), r3) // this version's setup
	inputConsumersInMemory(t, b2)
	got := &inbox{ack: true}
	c2, err := b2.ConsumeInputs(ctxT(t), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	bustest.Eventually(t, 30*time.Second, "both inputs delivered", func() bool { return got.len() == 2 })
	ids := []string{got.get()[0].ID, got.get()[1].ID}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"in_held", "in_waiting"}) {
		t.Fatalf("delivered %v", ids)
	}
}

// TestSetupReplacesInputConsumersKeptOnFileAtR1: a server of its own, as
// an older version left it (the consumers' state on file), is set up with
// them in memory, the input it held waiting delivered.
func TestSetupReplacesInputConsumersKeptOnFileAtR1(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	b := open(t, cfg)
	keepInputConsumersOnFile(t, b)
	if _, err := b.PublishInput(ctxT(t), "s_waiting", wire.Input{ID: "in_waiting", Command: wire.CommandRun, Text: "waiting"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b = open(t, cfg)
	inputConsumersInMemory(t, b)
	got := &inbox{ack: true}
	c, err := b.ConsumeInputs(ctxT(t), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	bustest.Eventually(t, 30*time.Second, "the waiting input delivered", func() bool { return got.len() == 1 })
}

// keepInputConsumersOnFile makes b's partitions' consumers again as an
// older version set them up: their state on file.
func keepInputConsumersOnFile(t *testing.T, b *Bus) {
	t.Helper()
	for p := range b.cfg.Partitions {
		old := b.inputConsumerConfig(p)
		old.MemoryStorage = false
		if err := b.in.DeleteConsumer(ctxT(t), old.Durable); err != nil {
			t.Fatal(err)
		}
		if _, err := b.in.CreateConsumer(ctxT(t), old); err != nil {
			t.Fatal(err)
		}
	}
}

// inputConsumersInMemory checks that b's partitions' consumers keep their
// state in memory.
func inputConsumersInMemory(t *testing.T, b *Bus) {
	t.Helper()
	for p := range b.cfg.Partitions {
		pc, err := b.in.Consumer(ctxT(t), wire.PartitionConsumer(p))
		if err != nil {
			t.Fatal(err)
		}
		if !pc.CachedInfo().Config.MemoryStorage {
			t.Errorf("consumer %d keeps its state on file", p)
		}
	}
}

// TestNoDirectStreamsServeNoDirectGet: the streams whose direct gets no
// credential is denied (wire.NoDirectStreams: only their consumers are,
// for room in every JWT) serve none, and the tenants' answers have a
// stream of their own, as the answers do.
func TestNoDirectStreamsServeNoDirectGet(t *testing.T) {
	t.Parallel()
	b := &Bus{cfg: Default()}
	cfgs := map[string]jetstream.StreamConfig{wire.AnswerStream: b.answerStreamConfig(), wire.TenantAnswerStream: b.tenantAnswerStreamConfig()}
	for _, name := range wire.NoDirectStreams() {
		c, ok := cfgs[name]
		if !ok || c.Name != name {
			t.Errorf("no configuration of %s here: check that it serves no direct get", name)
			continue
		}
		if c.AllowDirect || c.MirrorDirect {
			t.Errorf("%s serves direct gets, which no credential is denied", name)
		}
	}
	if got := cfgs[wire.TenantAnswerStream].Subjects; len(got) != 1 || got[0] != wire.TenantAnswerSubjects {
		t.Errorf("the tenants' answers' subjects: %v", got)
	}
}

// TestSetupMovesUnnamedInputsToTheTenantStream: a layout of setup version
// 4 (TAH_IN storing tah.sess.*.in, TAH_TIN tenants' inputs only) with an
// input pending is updated in place, in the order the server allows (TAH_IN
// gives up tah.sess.*.in before TAH_TIN takes it,
// releaseUnnamedInputs): the pending input is
// delivered, a named input is stored by TAH_IN and an unnamed one reaches
// its partition through TAH_TIN.
func TestSetupMovesUnnamedInputsToTheTenantStream(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b := connected(t, srv.ClientURL())
	v4 := func(c jetstream.StreamConfig) jetstream.StreamConfig {
		c.Metadata = maps.Clone(c.Metadata)
		c.Metadata[wire.MetaSetup] = "4"
		return c
	}
	tin := v4(b.tenantInputStreamConfig())
	tin.Subjects = []string{wire.TenantInputSubjects}
	in := v4(b.inputStreamConfig())
	in.Subjects = []string{wire.InputSubjects}
	in.SubjectTransform = &jetstream.SubjectTransformConfig{Source: wire.InputSubjects, Destination: wire.UnnamedInputTransform(b.cfg.Partitions)}
	in.Sources[1].SubjectTransforms = in.Sources[1].SubjectTransforms[:1]
	for _, c := range []jetstream.StreamConfig{tin, in} {
		if _, err := b.js.UpdateStream(ctxT(t), c); err != nil {
			t.Fatalf("%s as version 4: %v", c.Name, err)
		}
	}
	pending := nats.NewMsg(wire.InputSubject("s_before", ""))
	pending.Header.Set(wire.HeaderCommand, string(wire.CommandResume))
	pending.Header.Set(wire.HeaderMsgID, "s_before:in_before")
	if ack, err := b.js.PublishMsg(ctxT(t), pending); err != nil || ack.Stream != wire.InputStream {
		t.Fatalf("an input to the version 4 layout: %+v %v", ack, err)
	}

	up := connected(t, srv.ClientURL())
	for name, want := range map[string][]string{wire.InputStream: {wire.NamedInputSubjects}, wire.TenantInputStream: {wire.TenantInputSubjects, wire.InputSubjects}} {
		s, err := up.js.Stream(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, want) || s.CachedInfo().Config.Metadata[wire.MetaSetup] != strconv.Itoa(wire.SetupVersion) {
			t.Fatalf("%s: subjects %v (want %v), metadata %v", name, got, want, s.CachedInfo().Config.Metadata)
		}
	}
	named := nats.NewMsg(wire.InputSubject("s_after", "alice"))
	named.Header.Set(wire.HeaderCommand, string(wire.CommandResume))
	named.Header.Set(wire.HeaderMsgID, "s_after:in_named")
	unnamed := nats.NewMsg(wire.InputSubject("s_after", ""))
	unnamed.Header.Set(wire.HeaderCommand, string(wire.CommandResume))
	unnamed.Header.Set(wire.HeaderMsgID, "s_after:in_unnamed")
	// The named input first: a source that starts after both were stored
	// (the server makes it in the background) starts at the input stream's
	// last time, and skips what TAH_TIN stored before it (docs/operations.md,
	// the upgrade to setup version 5).
	for _, sent := range []struct {
		m      *nats.Msg
		stream string
	}{{named, wire.InputStream}, {unnamed, wire.TenantInputStream}} {
		if ack, err := up.js.PublishMsg(ctxT(t), sent.m); err != nil || ack.Stream != sent.stream {
			t.Fatalf("%s: %+v %v, want stored by %s", sent.m.Subject, ack, err, sent.stream)
		}
	}
	ib := &inbox{ack: true}
	c, err := up.ConsumeInputs(ctxT(t), ib.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// A hang's deadline: the source's consumer restarts after the update.
	bustest.Eventually(t, 2*time.Minute, "three inputs delivered", func() bool { return ib.len() == 3 })
	var got []string
	for _, m := range ib.get() {
		got = append(got, m.Session+"/"+m.ID+"/"+m.Sender)
	}
	slices.Sort(got)
	if want := "s_after/in_named/alice s_after/in_unnamed/ s_before/in_before/"; strings.Join(got, " ") != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}
