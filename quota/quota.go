package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// ErrExceeded: a tenant's quota is reached (an *ExceededError says which).
var ErrExceeded = errors.New(event.CodeQuotaExceeded)

// ExceededError is a request over a quota: which, its limit, what was
// used, when it resets.
type ExceededError struct{ Reached event.QuotaReached }

func (e *ExceededError) Error() string {
	return e.Reached.String() + ": " + advice(e.Reached)
}

func (e *ExceededError) Unwrap() error { return ErrExceeded }

// advice says what to do about reached quota q.
func advice(q event.QuotaReached) string {
	flag := map[string]string{event.QuotaSessions: "--max-sessions", event.QuotaTokensPerDay: "--tokens-per-day", event.QuotaCostPerDay: "--cost-per-day",
		event.QuotaInputsPerSecond: "--inputs-per-second", event.QuotaStorage: "--max-storage"}[q.Quota]
	raise := fmt.Sprintf("an admin raises it with tahctl tenant set %s %s N", q.Tenant, flag)
	if q.Resets != nil {
		return "wait until it resets, or " + raise
	}
	return raise
}

// Meter counts tenants' usage and checks it against their limits. Its
// methods may be called from any goroutine; Close stops the watch of the
// limits it owns.
type Meter struct {
	js  jetstream.JetStream
	log *slog.Logger
	now func() time.Time
	// onTenant is told of the tenants the watch finds (StartWith).
	onTenant func(name string, present bool)

	mu      sync.RWMutex
	limits  map[string]wire.TenantLimits // by tenant; absent: none
	streams map[string]jetstream.Stream  // by name, once found
	// unsent are the amounts Spend added to each counter that are in no
	// batch yet, sending those of the flusher's batch not yet acknowledged
	// (flush.go); kick wakes the flusher.
	unsent  map[string]int64
	sending map[string]sendingAmount
	kick    chan struct{}
	// known are the counters' totals as last read or acknowledged, and
	// when: a check within readFresh of it takes the total from here
	// (package doc).
	known map[string]knownTotal

	cancel context.CancelFunc
	done   chan struct{}
}

// watchRetry is how long the watch of the limits waits before it looks
// again for a registry that is not there yet (a node on an external NATS
// has none: its tenants have no limits), or after it failed.
const watchRetry = 2 * time.Second

// Start returns a Meter on js, following the tenants' limits in the
// registry from now until Close.
func Start(js jetstream.JetStream, log *slog.Logger) *Meter { return StartWith(js, log, nil) }

// StartWith is Start that also tells onTenant, when set, of every tenant of
// the registry as the watch finds it (present), and of every one removed
// from it: at first all of them, then as they come and go (a tenant told
// present twice is one tenant). It is called on the watch's goroutine and
// must not block.
func StartWith(js jetstream.JetStream, log *slog.Logger, onTenant func(name string, present bool)) *Meter {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Meter{js: js, log: log, now: time.Now, onTenant: onTenant, limits: map[string]wire.TenantLimits{}, streams: map[string]jetstream.Stream{},
		unsent: map[string]int64{}, sending: map[string]sendingAmount{}, kick: make(chan struct{}, 1), known: map[string]knownTotal{},
		cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { m.watch(ctx) })
	wg.Go(func() { m.flusher(ctx) })
	go func() { wg.Wait(); close(m.done) }()
	return m
}

// Close stops following the limits, and sends what Spend counted that is
// not sent yet (for at most flushOnClose).
func (m *Meter) Close() {
	m.cancel()
	<-m.done
}

// watch follows the registry's tenants, their limits into m.limits.
func (m *Meter) watch(ctx context.Context) {
	for {
		kv, err := m.js.KeyValue(ctx, wire.CredsBucket)
		if err == nil {
			err = m.follow(ctx, kv)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			m.log.Warn("following the tenants' limits: retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchRetry):
		}
	}
}

// follow applies every change of a tenant's entry of kv until ctx ends.
func (m *Meter) follow(ctx context.Context, kv jetstream.KeyValue) error {
	w, err := kv.WatchFiltered(ctx, []string{wire.CredsTenantKeyPrefix + "*"})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch of the registry ended")
			}
			if e == nil {
				continue // the entries there were are all in
			}
			name := strings.TrimPrefix(e.Key(), wire.CredsTenantKeyPrefix)
			if m.onTenant != nil {
				m.onTenant(name, e.Operation() == jetstream.KeyValuePut)
			}
			if e.Operation() != jetstream.KeyValuePut {
				m.SetLimits(name, wire.TenantLimits{})
				continue
			}
			var t wire.Tenant
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				m.log.Warn("a tenant's entry of the registry is not a tenant: its limits are left as they were", "key", e.Key(), "error", err)
				continue
			}
			m.SetLimits(name, t.Limits)
		}
	}
}

// SetLimits makes l tenant's limits here at once: the node that changed
// them applies them before the watch brings them back.
func (m *Meter) SetLimits(tenant string, l wire.TenantLimits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.IsZero() {
		delete(m.limits, tenant)
		return
	}
	m.limits[tenant] = l
}

// Limits are tenant's limits as this node knows them.
func (m *Meter) Limits(tenant string) wire.TenantLimits {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.limits[tenant]
}

// AddSession counts one more session of tenant, which the caller is about
// to make, and returns undo, which takes it back when the session was not
// made. Over tenant's MaxSessions it counts nothing and fails with an
// *ExceededError. The default tenant ("") is not counted.
func (m *Meter) AddSession(ctx context.Context, tenant string) (undo func(context.Context), err error) {
	if tenant == "" {
		return func(context.Context) {}, nil
	}
	if q, err := m.storageReached(ctx, tenant); err != nil || q != nil {
		if err != nil {
			return nil, err
		}
		return nil, &ExceededError{*q}
	}
	subj := wire.UsageSessionsSubject(tenant)
	total, seq, err := m.add(ctx, subj, 1, "")
	if err != nil {
		return nil, fmt.Errorf("count tenant %s's sessions: %w", tenant, err)
	}
	m.learn(subj, total, seq)
	undo = func(ctx context.Context) {
		total, seq, err := m.add(ctx, subj, -1, "")
		if err != nil {
			m.log.Warn("a session not made is still counted in its tenant's quota", "tenant", tenant, "error", err)
			return
		}
		m.learn(subj, total, seq)
	}
	if max := m.Limits(tenant).MaxSessions; max != nil && total > *max {
		undo(ctx)
		return nil, &ExceededError{event.QuotaReached{Tenant: tenant, Quota: event.QuotaSessions, Limit: float64(*max), Used: float64(total - 1)}}
	}
	return undo, nil
}

// AddInput counts an input to a session of tenant, in the second it came,
// when tenant has a limit of inputs per second, and fails with an
// *ExceededError when the second's count is over it (the input is to be
// refused; it stays counted: a tenant that floods is refused for the rest
// of the second). Without a limit it counts nothing and costs nothing. The
// counters are in memory (wire.UsageSecStream): exact across nodes, lost
// with a second's count when the server that holds them restarts.
func (m *Meter) AddInput(ctx context.Context, tenant string) error {
	limit := m.Limits(tenant).InputsPerSecond
	if tenant == "" || limit == nil {
		return nil
	}
	now := m.now()
	total, _, err := m.add(ctx, wire.UsageSecSubject(tenant, now), 1, "")
	if err != nil {
		return fmt.Errorf("count tenant %s's inputs: %w", tenant, err)
	}
	if total > *limit {
		resets := now.Truncate(time.Second).Add(time.Second).UTC()
		return &ExceededError{event.QuotaReached{Tenant: tenant, Quota: event.QuotaInputsPerSecond, Limit: float64(*limit), Used: float64(total - 1), Resets: &resets}}
	}
	return nil
}

// storageReached is tenant's storage quota when it is used up.
func (m *Meter) storageReached(ctx context.Context, tenant string) (*event.QuotaReached, error) {
	max := m.Limits(tenant).MaxStorage
	if max == nil {
		return nil, nil
	}
	used, err := m.total(ctx, wire.UsageStream, wire.UsageStorageSubject(tenant))
	if err != nil {
		return nil, fmt.Errorf("tenant %s's storage: %w", tenant, err)
	}
	if used >= *max {
		return &event.QuotaReached{Tenant: tenant, Quota: event.QuotaStorage, Limit: float64(*max), Used: float64(used)}, nil
	}
	return nil, nil
}

// Reached is the quota of tenant that stops its LLM calls, if one is used
// up: its storage, or a quota per day (until it resets). nil for a tenant
// without such limits.
func (m *Meter) Reached(ctx context.Context, tenant string) (*event.QuotaReached, error) {
	l := m.Limits(tenant)
	if tenant == "" || (l.TokensPerDay == nil && l.CostPerDay == nil && l.MaxStorage == nil) {
		return nil, nil
	}
	if q, err := m.storageReached(ctx, tenant); err != nil || q != nil {
		return q, err
	}
	now := m.now().UTC()
	resets := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if l.TokensPerDay != nil {
		used, err := m.total(ctx, wire.UsageDayStream, wire.UsageDaySubject(tenant, now, wire.UsageDayTokens))
		if err != nil {
			return nil, fmt.Errorf("tenant %s's tokens today: %w", tenant, err)
		}
		if used >= *l.TokensPerDay {
			return &event.QuotaReached{Tenant: tenant, Quota: event.QuotaTokensPerDay, Limit: float64(*l.TokensPerDay), Used: float64(used), Resets: &resets}, nil
		}
	}
	if l.CostPerDay != nil {
		micro, err := m.total(ctx, wire.UsageDayStream, wire.UsageDaySubject(tenant, now, wire.UsageDayCost))
		if err != nil {
			return nil, fmt.Errorf("tenant %s's cost today: %w", tenant, err)
		}
		if used := float64(micro) / 1e6; used >= *l.CostPerDay {
			return &event.QuotaReached{Tenant: tenant, Quota: event.QuotaCostPerDay, Limit: *l.CostPerDay, Used: used, Resets: &resets}, nil
		}
	}
	return nil, nil
}

// Spend adds tokens and costUSD, what an LLM call of a session of tenant
// used, to the tenant's counts of today. It does not wait for the counters:
// the Meter's flusher sends what was spent, added up per counter, a publish
// at a time (flush.go), so that a step does not wait for a durable write of
// its own, and many steps share one; Reached counts what is not sent yet.
// The default tenant is not counted. It never fails.
func (m *Meter) Spend(_ context.Context, tenant string, tokens int64, costUSD float64) error {
	if tenant == "" {
		return nil
	}
	now := m.now()
	micro := int64(math.Round(costUSD * 1e6))
	if tokens <= 0 && micro <= 0 {
		return nil
	}
	m.mu.Lock()
	if tokens > 0 {
		m.unsent[wire.UsageDaySubject(tenant, now, wire.UsageDayTokens)] += tokens
	}
	if micro > 0 {
		m.unsent[wire.UsageDaySubject(tenant, now, wire.UsageDayCost)] += micro
	}
	m.mu.Unlock()
	m.wake()
	return nil
}

// Store adds bytes, what a session of tenant wrote to the log and the
// object store, to the tenant's storage, as Spend adds (sent by the
// flusher). The default tenant is not counted. It never fails.
func (m *Meter) Store(_ context.Context, tenant string, bytes int64) error {
	if tenant == "" || bytes <= 0 {
		return nil
	}
	m.mu.Lock()
	m.unsent[wire.UsageStorageSubject(tenant)] += bytes
	m.mu.Unlock()
	m.wake()
	return nil
}

// wake kicks the flusher, unless a flush is due already.
func (m *Meter) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Usage is what tenant used: its sessions and storage, today's tokens and
// cost.
func (m *Meter) Usage(ctx context.Context, tenant string) (wire.TenantUsage, error) {
	var u wire.TenantUsage
	now := m.now()
	var micro int64
	for _, c := range []struct {
		stream, subject string
		into            *int64
	}{
		{wire.UsageStream, wire.UsageSessionsSubject(tenant), &u.Sessions},
		{wire.UsageStream, wire.UsageStorageSubject(tenant), &u.StorageBytes},
		{wire.UsageDayStream, wire.UsageDaySubject(tenant, now, wire.UsageDayTokens), &u.TokensDay},
		{wire.UsageDayStream, wire.UsageDaySubject(tenant, now, wire.UsageDayCost), &micro},
	} {
		v, err := m.total(ctx, c.stream, c.subject)
		if err != nil {
			return u, fmt.Errorf("tenant %s's usage: %w", tenant, err)
		}
		*c.into = v
	}
	u.CostDayUSD = float64(micro) / 1e6
	return u, nil
}

// add adds delta to the counter subj and returns its new total and the
// sequence of the message that holds it, for the caller to learn. With
// id, the add is stored once however often it is sent within the stream's
// duplicate window (Nats-Msg-Id): the flusher sends a batch again after an
// error that may have followed its storing; then the total is not told
// (sequence 0).
func (m *Meter) add(ctx context.Context, subj string, delta int64, id string) (total int64, seq uint64, err error) {
	msg := nats.NewMsg(subj)
	msg.Header.Set(wire.HeaderIncr, fmt.Sprintf("%+d", delta))
	if id != "" {
		msg.Header.Set(wire.HeaderMsgID, id)
	}
	ack, err := m.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, 0, err
	}
	if ack.Duplicate {
		return 0, 0, nil
	}
	v, err := strconv.ParseInt(ack.Value, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("counter %s: the total %q is not a number: %w", subj, ack.Value, err)
	}
	return v, ack.Sequence, nil
}

// total is counter subj's value with what Spend added to it that is not
// sent yet.
func (m *Meter) total(ctx context.Context, name, subj string) (int64, error) {
	if _, err := m.value(ctx, name, subj); err != nil {
		return 0, err
	}
	// Read again under the lock that the flusher takes to move an amount
	// from unsent into the total, so that no amount counts twice or never.
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.known[subj].total + m.unsent[subj] + m.sending[subj].n, nil
}

// knownTotal is a counter's total as of its message of sequence seq in
// its stream, learnt at a time.
type knownTotal struct {
	total int64
	seq   uint64
	at    time.Time
}

// readFresh is how long a counter's total, read or acknowledged, stands
// for it: a check of a day's quota reads each counter at most once in that
// time, however many steps check it (row 12 of make bench measured a read
// a check as a fifth of a tenant's turn). A node's own spend is always in
// its totals (the flusher's acknowledgements, and unsent); what the other
// nodes' sessions of the tenant spent in the last readFresh may not be yet.
const readFresh = time.Second

// counter is the body of a counter's message.
type counter struct {
	Value string `json:"val"`
}

// value is the total of counter subj of stream name; 0 when it never was
// added to (or its day is over).
func (m *Meter) value(ctx context.Context, name, subj string) (int64, error) {
	m.mu.RLock()
	k, ok := m.known[subj]
	_, busy := m.sending[subj]
	m.mu.RUnlock()
	if busy || ok && m.now().Sub(k.at) < readFresh {
		// While an amount of this node's is on its way, a read may or may
		// not hold it (total() adds it): the acknowledgement tells the
		// total that does, in a moment.
		return k.total, nil
	}
	if err := m.read(ctx, name, subj); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.known[subj].total, nil
}

// learn records total, of the counter's message of sequence seq, as
// counter subj's, now, unless one of a later sequence is known (the
// answers to adds and reads on several goroutines come in any order).
func (m *Meter) learn(subj string, total int64, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.learnLocked(subj, total, seq)
}

func (m *Meter) learnLocked(subj string, total int64, seq uint64) {
	if k, ok := m.known[subj]; ok && k.seq > seq {
		return
	}
	m.known[subj] = knownTotal{total: total, seq: seq, at: m.now()}
}

// read reads counter subj of stream name from the server, and learns its
// total (0 when it was never added to, or its day is over).
func (m *Meter) read(ctx context.Context, name, subj string) error {
	s, err := m.stream(ctx, name)
	if err != nil {
		return err
	}
	msg, err := s.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		m.learnRead(subj, 0, 0)
		return nil
	}
	if err != nil {
		return err
	}
	var c counter
	if err := json.Unmarshal(msg.Data, &c); err != nil {
		return fmt.Errorf("counter %s: %w", subj, err)
	}
	v, err := strconv.ParseInt(c.Value, 10, 64)
	if err != nil {
		return fmt.Errorf("counter %s: the total %q is not a number: %w", subj, c.Value, err)
	}
	m.learnRead(subj, v, msg.Sequence)
	return nil
}

// learnRead is learn for a total read from the server, which is dropped
// when an amount of this node's went out to the counter meanwhile: whether
// the read holds it is not known (total() would count it twice: 1 run in 10
// of TestStorageQuota), and its acknowledgement tells the total that does.
func (m *Meter) learnRead(subj string, total int64, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, busy := m.sending[subj]; busy {
		return
	}
	m.learnLocked(subj, total, seq)
}

// stream is the stream name, looked up once.
func (m *Meter) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	m.mu.RLock()
	s, ok := m.streams[name]
	m.mu.RUnlock()
	if ok {
		return s, nil
	}
	s, err := m.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	m.mu.Lock()
	m.streams[name] = s
	m.mu.Unlock()
	return s, nil
}
