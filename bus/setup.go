package bus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/wire"
)

// setupAttempt bounds the first attempt of setup; setupWithRetry repeats
// attempts that timed out or met a cluster still forming, until
// Config.ReadyTimeout, and gives an attempt that used all its time twice
// that time the next time, up to maxSetupAttempt.
const (
	setupAttempt    = 5 * time.Second
	maxSetupAttempt = 40 * time.Second
)

// setupWithRetry runs setup until it succeeds, fails for a reason that
// retrying cannot change, or cfg.ReadyTimeout passes. Every step of setup is
// idempotent, so an attempt that timed out half-way is simply run again (nodes
// starting together race to create the same streams). An attempt is
// bounded so that a request lost in a forming cluster is made again soon.
// And an attempt that ran out of time gets twice as much the next time,
// since setup is some fifty JetStream requests: on a loaded machine, where
// each took a few hundred milliseconds, every attempt of a fixed five
// seconds ran out half-way, and three nodes never started (CI: "stream
// TAH_IN: context deadline exceeded" for two minutes, a different stream at
// each try). Only then: attempts that failed at once (a cluster still
// forming: "no suitable peers") leave the bound as it is, so that a request
// lost after them is still made again within five seconds (doubled at each
// of those quick failures, it once waited out the whole ReadyTimeout). An
// attempt goes on from the step the last one stopped at: three nodes
// forming on a loaded machine each spent attempts of 5 and 10 s making again
// what an earlier one had made, the third one starting only 20 s later.
func (b *Bus) setupWithRetry(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	attempt := setupAttempt
	steps := b.setupSteps()
	for {
		actx, acancel := context.WithTimeout(ctx, attempt)
		var err error
		for len(steps) > 0 {
			if err = steps[0](actx); err != nil {
				break
			}
			steps = steps[1:]
		}
		ranOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		acancel()
		if ranOut {
			attempt = min(2*attempt, maxSetupAttempt)
		}
		if err == nil {
			b.startPlacer() // an embedded cluster's streams are spread over its servers (placement.go)
			return nil
		}
		if errors.Is(err, ErrIncompatibleSetup) || errors.Is(err, ErrNotSetUp) || ctx.Err() != nil || !settingUp(err) {
			return err
		}
		if b.cfg.Logger != nil {
			b.cfg.Logger.Warn("setting up TAH streams: retrying", "error", err, "next_try_within", attempt)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// settingUp reports whether err, met during setup, may pass if setup runs
// again: NATS is temporarily unavailable, or a stream that setup has just
// made or found is "not found" (10059) by a request that reached a server of
// a forming cluster whose meta layer has not applied the stream yet: seen
// when three nodes start together, one of them listing TAH_IN's consumers
// right after another created the stream.
func settingUp(err error) bool {
	return natsx.Temporary(err) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// setupSteps are what setup does, in order: each creates or updates (or,
// with NoSetup, checks) streams, consumers or buckets and keeps handles on
// them. Each is idempotent, and one that failed is run again whole.
func (b *Bus) setupSteps() []func(context.Context) error {
	consumersDone := map[string]bool{} // the input consumers an attempt set up
	kv := func(dst *jetstream.KeyValue, cfg jetstream.KeyValueConfig) func(context.Context) error {
		return func(ctx context.Context) (err error) {
			*dst, err = b.ensureKV(ctx, cfg)
			return err
		}
	}
	return []func(context.Context) error{
		b.ensureLog,
		// The schedules first: the input stream sources them.
		func(ctx context.Context) error {
			_, err := b.ensureStream(ctx, b.scheduleStreamConfig())
			return err
		},
		func(ctx context.Context) error {
			legacy, err := b.legacyLog(ctx)
			if err != nil || legacy != nil { // else after the migration: see ensureTenantInputs
				return err
			}
			if err := b.releaseUnnamedInputs(ctx); err != nil {
				return err
			}
			return b.ensureTenantInputs(ctx)
		},
		func(ctx context.Context) (err error) {
			if b.in, err = b.ensureStream(ctx, b.inputStreamConfig()); err != nil {
				return err
			}
			b.inputCommit = newCommitter(b, b.in.CachedInfo().Config)
			return nil
		},
		func(ctx context.Context) error { return b.ensureInputConsumers(ctx, consumersDone) },
		kv(&b.checkpoints, jetstream.KeyValueConfig{Bucket: wire.CheckpointBucket, Description: "TAH session state snapshots"}),
		kv(&b.toolResults, jetstream.KeyValueConfig{Bucket: wire.ToolResultBucket, Description: "TAH tool calls by session and call id (see docs/protocol.md)", TTL: b.cfg.ToolResultTTL}),
		kv(&b.nodes, jetstream.KeyValueConfig{Bucket: wire.NodeBucket, Description: "TAH node presence", TTL: b.cfg.NodeTTL}),
		func(ctx context.Context) (err error) {
			b.answers, err = b.ensureStream(ctx, b.answerStreamConfig())
			return err
		},
		func(ctx context.Context) error {
			for _, cfg := range b.usageStreamConfigs() {
				if _, err := b.ensureStream(ctx, cfg); err != nil {
					return err
				}
			}
			return nil
		},
		func(ctx context.Context) (err error) {
			b.artifacts, err = b.ensureObjectStore(ctx)
			return err
		},
	}
}

// releaseUnnamedInputs moves an input stream of setup version 4, which
// stores tah.sess.*.in itself, to the named subjects, so that TAH_TIN may
// take tah.sess.*.in (the server refuses two streams one subject): its
// source of TAH_TIN without the route of that subject yet, which a consumer
// of TAH_TIN could not filter on before TAH_TIN has it (setup then sets the
// input stream's full sources). TAH_TIN is made before the input stream
// otherwise: a stream that sources another is best made after it.
func (b *Bus) releaseUnnamedInputs(ctx context.Context) error {
	if b.cfg.NoSetup {
		return nil
	}
	s, err := b.js.Stream(ctx, wire.InputStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", wire.InputStream, err)
	}
	if !slices.Contains(s.CachedInfo().Config.Subjects, wire.InputSubjects) {
		return nil
	}
	cfg := b.inputStreamConfig()
	for _, src := range cfg.Sources {
		src.SubjectTransforms = slices.DeleteFunc(src.SubjectTransforms, func(t jetstream.SubjectTransformConfig) bool {
			return t.Source == wire.InputSubjects
		})
	}
	_, err = b.ensureStream(ctx, cfg)
	return err
}

// ensureTenantInputs sets up the stream of tenants' inputs
// (tenantInputStreamConfig) and of the answers to their sessions' queries
// (tenantAnswerStreamConfig). Their subjects overlap those of a log of
// version 1 (tah.sess.<sid>.evt.<type>), which the server refuses: where one
// is still there, they are set up once the log is migrated (Open), the input
// stream sourcing the first meanwhile from nothing (the server tries again
// until it is there; no tenant's input can be stored before it is).
func (b *Bus) ensureTenantInputs(ctx context.Context) error {
	if _, err := b.ensureStream(ctx, b.tenantInputStreamConfig()); err != nil {
		return err
	}
	var err error
	b.tenantAnswers, err = b.ensureStream(ctx, b.tenantAnswerStreamConfig())
	return err
}

// tenantAnswerStreamConfig is answerStreamConfig for tenants' sessions
// (wire.TenantAnswerStream): a stream of its own rather than a second
// subject of TAH_ANSWERS, so that a node of an earlier version, which
// would set TAH_ANSWERS's subjects back, leaves it alone.
func (b *Bus) tenantAnswerStreamConfig() jetstream.StreamConfig {
	c := b.answerStreamConfig()
	c.Name, c.Subjects = wire.TenantAnswerStream, []string{wire.TenantAnswerSubjects}
	c.Description = "TAH answers to agent protocol queries of tenants' sessions (approvals), until a node decides them"
	return c
}

// answerStreamConfig is the stream of the answers to agent protocol query
// chunks (wire.AnswerStream): kept until a node turned each into an approve
// or a deny, a week at most; an answer is one short message.
func (b *Bus) answerStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.AnswerStream,
		Description: "TAH answers to agent protocol queries (approvals), until a node decides them",
		Subjects:    []string{wire.AnswerSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      7 * 24 * time.Hour,
		MaxMsgSize:  64 << 10,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
		Duplicates:  wire.DuplicateWindow,
		Metadata:    b.metadata(),
	}
}

// usageStreamConfigs are the streams of the tenants' usage (package quota):
// counters (AllowMsgCounter), each subject's last value kept, and the
// running turns (a message a turn, with a TTL). A day's counters go after
// two days: each is read on its own day only; a second's and the running
// turns are kept in memory. Only nodes read or write them (no client role
// is allowed their subjects, and they allow no direct get).
func (b *Bus) usageStreamConfigs() []jetstream.StreamConfig {
	usage := func(name, desc, subjects string, age time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:              name,
			Description:       desc,
			Subjects:          []string{subjects},
			Retention:         jetstream.LimitsPolicy,
			MaxMsgs:           -1,
			MaxBytes:          -1,
			MaxAge:            age,
			MaxMsgsPerSubject: 1,
			MaxMsgSize:        1 << 10,
			Discard:           jetstream.DiscardOld,
			Storage:           jetstream.FileStorage,
			Replicas:          b.cfg.Replicas,
			Duplicates:        wire.DuplicateWindow, // the server's default, said so that setups compare
			AllowMsgCounter:   true,
			Metadata:          b.metadata(),
		}
	}
	// A turn's message goes with its TTL; a rate needs no disk (a restart
	// forgets a second's count), and its age is the least a duplicate
	// window allows.
	turns := usage(wire.TurnStream, "TAH tenants' running turns (docs/tenancy.md)", wire.TurnSubjects, 0)
	turns.Storage, turns.AllowMsgCounter, turns.AllowMsgTTL = jetstream.MemoryStorage, false, true
	sec := usage(wire.UsageSecStream, "TAH tenants' inputs per second (docs/tenancy.md)", wire.UsageSecSubjects, wire.DuplicateWindow)
	sec.Storage = jetstream.MemoryStorage
	return []jetstream.StreamConfig{
		usage(wire.UsageStream, "TAH tenants' usage: sessions and storage (docs/tenancy.md)", wire.UsageSubjects, 0),
		usage(wire.UsageDayStream, "TAH tenants' usage per UTC day: tokens and cost (docs/tenancy.md)", wire.UsageDaySubjects, 48*time.Hour),
		sec,
		turns,
	}
}

// Answers is the stream of the answers to agent protocol queries.
func (b *Bus) Answers() jetstream.Stream { return b.answers }

// TenantAnswers is the stream of the answers to tenants' sessions' queries
// (wire.TenantAnswerStream).
func (b *Bus) TenantAnswers() jetstream.Stream { return b.tenantAnswers }

// EnsureKV is ensureKV for a bucket a node's part keeps outside the Bus (the
// registry of credentials, wire.CredsBucket), with the Bus's replicas.
func (b *Bus) EnsureKV(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return b.ensureKV(ctx, cfg)
}

// ensureKV looks the bucket up, creating it when missing and updating it when
// its replicas or TTL differ from cfg. (CreateOrUpdateKeyValue is not used: run
// by several nodes at once on a forming cluster, its update can hang.)
func (b *Bus) ensureKV(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Storage = jetstream.FileStorage
	cfg.Replicas = b.cfg.Replicas
	cfg.History = 1
	what := "KV bucket " + cfg.Bucket
	kv, err := b.js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if b.cfg.NoSetup {
			return nil, b.setupErr(what, err)
		}
		kv, err = b.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.js.KeyValue(ctx, cfg.Bucket)
		}
		if err == nil {
			return kv, nil
		}
	}
	if err != nil {
		return nil, b.setupErr(what, err)
	}
	si, err := b.js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, b.setupErr(what, err)
	}
	if have := si.CachedInfo().Config; have.Replicas != cfg.Replicas || have.MaxAge != cfg.TTL {
		if b.cfg.NoSetup {
			return nil, fmt.Errorf("%s has replicas %d and TTL %v, want %d and %v: start a TAH node of this version to update it: %w",
				what, have.Replicas, have.MaxAge, cfg.Replicas, cfg.TTL, ErrIncompatibleSetup)
		}
		if kv, err = b.js.UpdateKeyValue(ctx, cfg); err != nil {
			return nil, b.setupErr(what, err)
		}
	}
	return kv, nil
}

// ensureObjectStore sets up the object store tah_artifacts with the Bus's
// replicas, through the one set-up of that bucket (artifacts.Ensure).
func (b *Bus) ensureObjectStore(ctx context.Context) (jetstream.ObjectStore, error) {
	store, err := artifacts.Ensure(ctx, b.js, artifacts.Setup{Replicas: b.cfg.Replicas, CheckOnly: b.cfg.NoSetup})
	switch {
	case errors.Is(err, artifacts.ErrSettings):
		return nil, fmt.Errorf("%w: start a TAH node of this version to update it: %w", err, ErrIncompatibleSetup)
	case err != nil:
		return nil, b.setupErr("object store "+wire.ArtifactBucket, err)
	}
	return store, nil
}

func (b *Bus) setupErr(what string, err error) error {
	if b.cfg.NoSetup && (errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
		return fmt.Errorf("%s does not exist: start a TAH node against %s first: %w", what, b.ClientURL(), ErrNotSetUp)
	}
	return fmt.Errorf("set up %s: %w", what, err)
}

func (b *Bus) metadata(extra ...string) map[string]string {
	m := map[string]string{
		wire.MetaSetup:    strconv.Itoa(wire.SetupVersion),
		wire.MetaProtocol: strconv.Itoa(wire.ProtocolVersion),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// ensureLog creates or checks the shards of the event log, with the count
// the existing log has (its shard 0's metadata) or, for a new log, the
// configured one.
func (b *Bus) ensureLog(ctx context.Context) error {
	if b.shards != nil {
		return b.ensureShards(ctx) // the shards an earlier attempt did not make
	}
	have, err := b.logShards(ctx)
	if err != nil {
		return err
	}
	n := b.cfg.Shards
	switch {
	case have > 0 && n > 0 && have != n:
		return fmt.Errorf("the event log has %d shards (metadata %s of %s) and this node is configured with %d: the count is fixed when the log is created, so start every node with %d (or 0: the log's): %w",
			have, wire.MetaShards, wire.EventShardStream(0), n, have, ErrIncompatibleSetup)
	case have > 0:
		n = have
	case n == 0:
		n = wire.DefaultShards
	}
	b.shards, b.commits, b.appended = make([]jetstream.Stream, n), make([]*committer, n), make([]atomic.Uint64, n)
	return b.ensureShards(ctx)
}

// ensureShards makes each shard of the log that is not made yet.
func (b *Bus) ensureShards(ctx context.Context) error {
	for k, s := range b.shards {
		if s != nil {
			continue
		}
		s, err := b.ensureStream(ctx, b.shardStreamConfig(k, len(b.shards)))
		if err != nil {
			return err
		}
		b.shards[k], b.commits[k] = s, newCommitter(b, s.CachedInfo().Config)
	}
	return nil
}

// logShards reads the shard count of the existing log from its shard 0's
// metadata: 0 when there is no log yet (or shard 0 does not say, which
// ensureStream then reports).
func (b *Bus) logShards(ctx context.Context) (int, error) {
	s, err := b.js.Stream(ctx, wire.EventShardStream(0))
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("stream %s: %w", wire.EventShardStream(0), err)
	}
	n, err := strconv.Atoi(s.CachedInfo().Config.Metadata[wire.MetaShards])
	if err != nil || n < 1 {
		return 0, nil
	}
	return n, nil
}

// shardStreamConfig is shard k of a log of n shards.
func (b *Bus) shardStreamConfig(k, n int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.EventShardStream(k),
		Description: fmt.Sprintf("TAH event log, shard %d of %d: the records of the sessions of this shard", k, n),
		Subjects:    []string{wire.ShardSubjects(k)},
		Retention:   jetstream.LimitsPolicy,
		// No limits at all: in particular no MaxMsgsPerSubject, which counts per
		// subject, that is per session, and would silently drop its records.
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		Discard:           jetstream.DiscardOld,
		Storage:           jetstream.FileStorage,
		Replicas:          b.cfg.Replicas,
		Duplicates:        wire.DuplicateWindow,
		AllowDirect:       true,
		// Atomic batches group the appends of sessions that arrive together
		// into one fsync (batch.go). Set where the server has them (2.12+);
		// a node that only checks the setup (NoSetup) asks for nothing more
		// than the log has.
		AllowAtomicPublish: !b.cfg.NoSetup && b.atomicPublishSupported(),
		// Tenants' sessions' records, as stored, on their live feed: how a
		// tenant's credential, which has no JetStream API, follows them
		// (wire.LiveSubject). A default tenant's record matches no source.
		RePublish: &jetstream.RePublish{Source: wire.LiveRePublishSource(k), Destination: wire.LiveRePublishDestination},
		Metadata:  b.metadata(wire.MetaShards, strconv.Itoa(n)),
	}
}

func (b *Bus) inputStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:         wire.InputStream,
		Description:  "TAH inputs and commands, partitioned by session",
		Subjects:     []string{wire.NamedInputSubjects},
		Retention:    jetstream.WorkQueuePolicy,
		MaxConsumers: -1,
		MaxMsgs:      -1,
		MaxBytes:     -1,
		Discard:      jetstream.DiscardOld,
		Storage:      jetstream.FileStorage,
		Replicas:     b.cfg.Replicas,
		Duplicates:   wire.DuplicateWindow,
		AllowDirect:  true,
		// Inputs a node stores at the same moment share one fsync (batch.go),
		// where the server has atomic batches (2.12+).
		AllowAtomicPublish: !b.cfg.NoSetup && b.atomicPublishSupported(),
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      wire.NamedInputSubjects,
			Destination: wire.InputTransform(b.cfg.Partitions),
		},
		Sources:  b.inputSources(),
		Metadata: b.metadata(wire.MetaPartitions, strconv.Itoa(b.cfg.Partitions)),
	}
}

// ensureStream creates want, or checks the existing stream against it and
// updates it when it is older or differs in what can be changed in place.
func (b *Bus) ensureStream(ctx context.Context, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := b.js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if b.cfg.NoSetup {
			return nil, fmt.Errorf("stream %s does not exist: start a TAH node against %s first: %w", want.Name, b.ClientURL(), ErrNotSetUp)
		}
		s, err = b.js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another node created it at the same moment: check it as found.
			s, err = b.js.Stream(ctx, want.Name)
		} else if err == nil {
			return s, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", want.Name, err)
	}
	info := s.CachedInfo()
	have := info.Config
	ver, err := strconv.Atoi(have.Metadata[wire.MetaSetup])
	if err != nil {
		return nil, fmt.Errorf("stream %s exists but was not created by TAH (no %q metadata): remove it (nats stream rm %s) or point TAH at another account: %w",
			want.Name, wire.MetaSetup, want.Name, ErrIncompatibleSetup)
	}
	if ver > wire.SetupVersion {
		return nil, fmt.Errorf("stream %s was set up by a newer TAH (setup version %d, this build knows %d): upgrade this node: %w",
			want.Name, ver, wire.SetupVersion, ErrIncompatibleSetup)
	}
	diffs := streamDiffs(have, want)
	if len(diffs) == 0 {
		return s, nil
	}
	if b.cfg.NoSetup {
		return nil, fmt.Errorf("stream %s differs from this build's setup (%s): start a TAH node of this version to update it: %w",
			want.Name, strings.Join(diffs, "; "), ErrIncompatibleSetup)
	}
	if have.Storage != want.Storage || have.Retention != want.Retention {
		return nil, fmt.Errorf("stream %s has storage %v and retention %v, this build needs %v and %v, which cannot be changed in place: back it up and remove it (nats stream rm %s), then start again: %w",
			want.Name, have.Storage, have.Retention, want.Storage, want.Retention, want.Name, ErrIncompatibleSetup)
	}
	if hs, ws := have.Metadata[wire.MetaShards], want.Metadata[wire.MetaShards]; hs != ws && hs != "" {
		// Another node created the log with its count at the same moment.
		return nil, fmt.Errorf("stream %s is a shard of a log of %s shards, this node wants %s: the count is fixed when the log is created, so start every node with %s (or 0: the log's): %w",
			want.Name, hs, ws, hs, ErrIncompatibleSetup)
	}
	if want.Name == wire.InputStream {
		if hp := have.Metadata[wire.MetaPartitions]; hp != want.Metadata[wire.MetaPartitions] && info.State.Msgs > 0 {
			return nil, fmt.Errorf("stream %s holds %d inputs routed to %s partitions; changing to %s partitions now would strand them: let the nodes finish them with partitions %s, then restart with %s: %w",
				want.Name, info.State.Msgs, hp, want.Metadata[wire.MetaPartitions], hp, want.Metadata[wire.MetaPartitions], ErrIncompatibleSetup)
		}
	}
	// Keep the placement the streams were given (placement.go, or an
	// operator's): TAH's setup does not say where a stream lives.
	if want.Placement == nil {
		want.Placement = have.Placement
	}
	// Keep metadata that the server or an operator added.
	md := maps.Clone(have.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	maps.Copy(md, want.Metadata)
	want.Metadata = md
	s, err = b.js.UpdateStream(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("update stream %s (%s): %w", want.Name, strings.Join(diffs, "; "), err)
	}
	return s, nil
}

// streamDiffs lists how have differs from want in what TAH sets.
func streamDiffs(have, want jetstream.StreamConfig) []string {
	var d []string
	add := func(what string, h, w any) { d = append(d, fmt.Sprintf("%s is %v, want %v", what, h, w)) }
	if !slices.Equal(have.Subjects, want.Subjects) {
		add("subjects", have.Subjects, want.Subjects)
	}
	if have.Retention != want.Retention {
		add("retention", have.Retention, want.Retention)
	}
	if have.Storage != want.Storage {
		add("storage", have.Storage, want.Storage)
	}
	if have.Replicas != want.Replicas {
		add("replicas", have.Replicas, want.Replicas)
	}
	if have.AllowDirect != want.AllowDirect {
		add("allow_direct", have.AllowDirect, want.AllowDirect)
	}
	if want.AllowAtomicPublish && !have.AllowAtomicPublish {
		add("allow_atomic", have.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	if have.MaxMsgsPerSubject != want.MaxMsgsPerSubject && want.MaxMsgsPerSubject != 0 {
		add("max_msgs_per_subject", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	}
	if have.Duplicates != want.Duplicates {
		add("duplicate_window", have.Duplicates, want.Duplicates)
	}
	if hr, wr := rePublishString(have.RePublish), rePublishString(want.RePublish); hr != wr {
		add("republish", hr, wr)
	}
	if hs, ws := sourcesString(have.Sources), sourcesString(want.Sources); hs != ws {
		add("sources", hs, ws)
	}
	if want.AllowMsgSchedules && !have.AllowMsgSchedules {
		add("allow_msg_schedules", have.AllowMsgSchedules, want.AllowMsgSchedules)
	}
	if want.AllowMsgTTL && !have.AllowMsgTTL {
		add("allow_msg_ttl", have.AllowMsgTTL, want.AllowMsgTTL)
	}
	if have.AllowMsgCounter != want.AllowMsgCounter {
		add("allow_msg_counter", have.AllowMsgCounter, want.AllowMsgCounter) // the server cannot change it
	}
	ht, wt := transformString(have.SubjectTransform), transformString(want.SubjectTransform)
	if ht != wt {
		add("subject_transform", ht, wt)
	}
	for _, k := range slices.Sorted(maps.Keys(want.Metadata)) {
		if have.Metadata[k] != want.Metadata[k] {
			add("metadata "+k, have.Metadata[k], want.Metadata[k])
		}
	}
	return d
}

func transformString(t *jetstream.SubjectTransformConfig) string {
	if t == nil {
		return "none"
	}
	return t.Source + " -> " + t.Destination
}

// inputConsumerConfig is the durable consumer of partition p.
//
// Its state (what it delivered, what is acknowledged) is kept in memory
// (MemoryStorage): TAH_IN is a work queue, so an acknowledged input is gone
// from the stream and the stream alone says what is left to do. On file,
// nats-server rewrote each consumer's state file (a new file and a rename)
// up to ten times a second under load: with 16 partitions, 8.6% of three
// nodes' CPU at R3 and 8.7% of the node holding TAH_IN at R1 in row 9 of
// make bench. Replicated, a replica that restarts catches up from the
// others and the cluster's meta layer keeps the consumer. A consumer whose
// state went with every replica, or with its server's JetStream (R1: a
// restart, a full disk's, bus/server.go), starts again from the stream's
// first input, which is exactly the inputs not acknowledged (delivered
// again, as after an ack wait); a consumer gone altogether is made again by
// the node pulling it (InputConsumer's heal) or its next setup.
func (b *Bus) inputConsumerConfig(p int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		MemoryStorage:  true,
		Durable:        wire.PartitionConsumer(p),
		Description:    fmt.Sprintf("TAH input partition %d", p),
		FilterSubject:  wire.PartitionFilter(p),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        b.cfg.InputAckWait,
		MaxDeliver:     -1,
		MaxAckPending:  b.cfg.InputMaxAckPending,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{wire.InputGroup},
		PinnedTTL:      b.cfg.InputPinnedTTL,
		Metadata:       map[string]string{wire.MetaSetup: strconv.Itoa(wire.SetupVersion)},
	}
}

// ensureInputConsumers creates or updates the durable consumer of every
// partition and removes those of partitions that no longer exist. It notes
// in done each consumer it found right or set up, and skips those an earlier
// attempt noted.
func (b *Bus) ensureInputConsumers(ctx context.Context, done map[string]bool) error {
	// Names come from the meta layer; listing full infos would ask every
	// consumer's leader, which a cluster still forming may not answer.
	have := map[string]bool{}
	names := b.in.ConsumerNames(ctx)
	for name := range names.Name() {
		have[name] = true
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", wire.InputStream, err)
	}
	wanted := map[string]bool{}
	for p := range b.cfg.Partitions {
		want := b.inputConsumerConfig(p)
		wanted[want.Durable] = true
		if done[want.Durable] {
			continue
		}
		ok := have[want.Durable]
		if ok {
			c, err := b.in.Consumer(ctx, want.Durable)
			switch {
			case errors.Is(err, jetstream.ErrConsumerNotFound):
				ok = false // listed while another node creates it
			case err != nil:
				return fmt.Errorf("consumer %s of %s: %w", want.Durable, wire.InputStream, err)
			case c.CachedInfo().Config.MemoryStorage != want.MemoryStorage && !b.cfg.NoSetup:
				// The server cannot change where a consumer keeps its state: one
				// set up by an older version (on file) is made again (a node
				// that sets nothing up takes it as it is). Its inputs stay in
				// the stream; those delivered and not acknowledged are
				// delivered again to the new one.
				if err := b.in.DeleteConsumer(ctx, want.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
					return fmt.Errorf("replace consumer %s of %s: %w", want.Durable, wire.InputStream, err)
				}
				ok = false
			case consumerMatches(c.CachedInfo().Config, want):
				done[want.Durable] = true
				continue
			}
		}
		if b.cfg.NoSetup {
			return fmt.Errorf("consumer %s of %s is missing or differs: start a TAH node of this version against %s: %w",
				want.Durable, wire.InputStream, b.ClientURL(), ErrNotSetUp)
		}
		var err error
		if ok {
			_, err = b.in.UpdateConsumer(ctx, want)
		} else {
			_, err = b.in.CreateConsumer(ctx, want)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				err = nil // another node created it at the same moment; the next setup checks it
			}
		}
		if err != nil {
			return fmt.Errorf("set up consumer %s of %s: %w", want.Durable, wire.InputStream, err)
		}
		done[want.Durable] = true
	}
	if b.cfg.NoSetup {
		return nil
	}
	for name := range have {
		if strings.HasPrefix(name, wire.PartitionConsumerPrefix) && !wanted[name] {
			if err := b.in.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("remove consumer %s of a partition that no longer exists: %w", name, err)
			}
		}
	}
	return nil
}

func consumerMatches(h, w jetstream.ConsumerConfig) bool {
	return h.FilterSubject == w.FilterSubject && h.AckPolicy == w.AckPolicy &&
		h.AckWait == w.AckWait && h.MaxAckPending == w.MaxAckPending &&
		h.PriorityPolicy == w.PriorityPolicy && slices.Equal(h.PriorityGroups, w.PriorityGroups) &&
		h.PinnedTTL == w.PinnedTTL && h.MaxDeliver == w.MaxDeliver &&
		h.Metadata[wire.MetaSetup] == w.Metadata[wire.MetaSetup]
}

// Checkpoints is the KV bucket tah_checkpoints of state snapshots (see
// docs/protocol.md for its keys).
func (b *Bus) Checkpoints() jetstream.KeyValue { return b.checkpoints }

// ToolResults is the KV bucket tah_tool_results where remote tool services
// store calls and results by session and call id before replying (its keys and
// values are the tool services' part of docs/protocol.md). Entries live
// Config.ToolResultTTL.
func (b *Bus) ToolResults() jetstream.KeyValue { return b.toolResults }

// Nodes is the KV bucket tah_nodes of node presence; entries expire after
// Config.NodeTTL unless refreshed.
func (b *Bus) Nodes() jetstream.KeyValue { return b.nodes }

// Artifacts is the object store tah_artifacts.
func (b *Bus) Artifacts() jetstream.ObjectStore { return b.artifacts }

// rePublishString is a stream's RePublish as streamDiffs shows it.
func rePublishString(r *jetstream.RePublish) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s to %s (headers only: %v)", r.Source, r.Destination, r.HeadersOnly)
}
