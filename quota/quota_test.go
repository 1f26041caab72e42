package quota_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/quota"
	"github.com/tah-dev/tah/wire"
)

// meter is a Meter on a real nats-server whose streams TAH's bus set up,
// with the registry of credentials, for the test to write tenants in.
func meter(t *testing.T) (*quota.Meter, jetstream.KeyValue) {
	t.Helper()
	b := openBus(t)
	kv, err := b.EnsureKV(context.Background(), jetstream.KeyValueConfig{Bucket: wire.CredsBucket})
	if err != nil {
		t.Fatal(err)
	}
	m := quota.Start(b.JetStream(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(m.Close)
	return m, kv
}

// openBus is TAH's bus on a nats-server of the test's own.
func openBus(t *testing.T) *bus.Bus {
	t.Helper()
	cfg := bus.Default()
	cfg.URL = bustest.Server(t).ClientURL()
	b, err := bus.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

func ptr[T any](v T) *T { return &v }

// putTenant writes tenant name with limits l in the registry, as
// tah.api.creds.tenants.set does, and waits for m to follow it.
func putTenant(t *testing.T, m *quota.Meter, kv jetstream.KeyValue, name string, l wire.TenantLimits) {
	t.Helper()
	b, _ := json.Marshal(wire.Tenant{Name: name, Added: time.Now(), Limits: l})
	if _, err := kv.Put(context.Background(), wire.CredsTenantKeyPrefix+name, b); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(l)
	bustest.Eventually(t, 30*time.Second, "the meter follows the registry", func() bool {
		have, _ := json.Marshal(m.Limits(name))
		return string(have) == string(want)
	})
}

// TestSessionsQuotaHoldsUnderConcurrentCreates: of many creates at once,
// exactly the quota's number are counted; the others are refused with
// which quota, its limit and what was used; a session not made is taken
// back; the default tenant is not counted.
func TestSessionsQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxSessions: ptr(int64(5))})

	var mu sync.Mutex
	var ok, refused int
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := m.AddSession(ctx, "acme")
			mu.Lock()
			defer mu.Unlock()
			var qe *quota.ExceededError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &qe) && errors.Is(err, quota.ErrExceeded):
				refused++
				if qe.Reached.Quota != event.QuotaSessions || qe.Reached.Limit != 5 || qe.Reached.Tenant != "acme" || qe.Reached.Resets != nil {
					t.Errorf("refusal %+v", qe.Reached)
				}
			default:
				t.Errorf("AddSession: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 5 || refused != 15 {
		t.Fatalf("%d counted, %d refused: want 5 and 15", ok, refused)
	}
	u, err := m.Usage(ctx, "acme")
	if err != nil || u.Sessions != 5 {
		t.Fatalf("usage %+v, %v: want 5 sessions", u, err)
	}

	// Raised: one more is counted, and taken back when it was not made.
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxSessions: ptr(int64(6))})
	undo, err := m.AddSession(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	undo(ctx)
	if _, err := m.AddSession(ctx, "acme"); err != nil {
		t.Fatalf("the session taken back is free again: %v", err)
	}
	if _, err := m.AddSession(ctx, "acme"); !errors.Is(err, quota.ErrExceeded) {
		t.Fatalf("the seventh: %v, want ErrExceeded", err)
	}
	if _, err := m.AddSession(ctx, ""); err != nil {
		t.Fatalf("the default tenant: %v", err)
	}
	if _, err := m.AddSession(ctx, "beta"); err != nil {
		t.Fatalf("a tenant without limits: %v", err)
	}
}

// TestDayQuotas: tokens and cost per day are reached once spent, say when
// they reset (the next UTC midnight), and go away with the limit; another
// tenant's spend is its own.
func TestDayQuotas(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	putTenant(t, m, kv, "acme", wire.TenantLimits{TokensPerDay: ptr(int64(1000)), CostPerDay: ptr(0.5)})
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("nothing spent: %+v, %v", q, err)
	}
	if err := m.Spend(ctx, "acme", 999, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := m.Spend(ctx, "beta", 5000, 9); err != nil {
		t.Fatal(err)
	}
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("under both: %+v, %v", q, err)
	}
	if err := m.Spend(ctx, "acme", 1, 0); err != nil {
		t.Fatal(err)
	}
	q, err := m.Reached(ctx, "acme")
	if err != nil || q == nil || q.Quota != event.QuotaTokensPerDay || q.Used != 1000 || q.Limit != 1000 || q.Resets == nil {
		t.Fatalf("at the token quota: %+v, %v", q, err)
	}
	now := time.Now().UTC()
	if !q.Resets.After(now) || q.Resets.Sub(now) > 24*time.Hour || q.Resets.Hour() != 0 || q.Resets.Minute() != 0 {
		t.Fatalf("resets %v: want the next UTC midnight", q.Resets)
	}

	putTenant(t, m, kv, "acme", wire.TenantLimits{CostPerDay: ptr(0.5)})
	if err := m.Spend(ctx, "acme", 10, 0.25); err != nil {
		t.Fatal(err)
	}
	q, err = m.Reached(ctx, "acme")
	if err != nil || q == nil || q.Quota != event.QuotaCostPerDay || q.Used != 0.5 {
		t.Fatalf("at the cost quota: %+v, %v", q, err)
	}
	u, err := m.Usage(ctx, "acme")
	if err != nil || u.TokensDay != 1010 || u.CostDayUSD != 0.5 {
		t.Fatalf("usage %+v, %v", u, err)
	}

	// Removed from the registry: no limit.
	if err := kv.Delete(ctx, wire.CredsTenantKeyPrefix+"acme"); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the meter follows the removal", func() bool { return m.Limits("acme").IsZero() })
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("no limit: %+v, %v", q, err)
	}
}

// TestNoRegistry: a node on a NATS without the registry (an external
// cluster's) knows no limits, and counts all the same.
func TestNoRegistry(t *testing.T) {
	ctx := context.Background()
	b := openBus(t)
	m := quota.Start(b.JetStream(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer m.Close()
	for range 3 {
		if _, err := m.AddSession(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
	}
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("%+v, %v", q, err)
	}
	if u, err := m.Usage(ctx, "acme"); err != nil || u.Sessions != 3 {
		t.Fatalf("usage %+v, %v", u, err)
	}
}

// TestSpentIsSentByClose: what Spend counted reaches the counters, even
// when the Meter closes at once (another node's Meter reads it).
func TestSpentIsSentByClose(t *testing.T) {
	ctx := context.Background()
	b := openBus(t)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := quota.Start(b.JetStream(), discard)
	for range 100 {
		if err := m.Spend(ctx, "acme", 7, 0.001); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	other := quota.Start(b.JetStream(), discard)
	defer other.Close()
	if u, err := other.Usage(ctx, "acme"); err != nil || u.TokensDay != 700 || u.CostDayUSD != 0.1 {
		t.Fatalf("usage %+v, %v: want 700 tokens and $0.1", u, err)
	}
}

// TestInputsPerSecond: a tenant's inputs in one second of the clock are
// counted up to its limit, the next refused until the second ends; a
// tenant without the limit is not counted at all.
func TestInputsPerSecond(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 10, 0, 0, 250e6, time.UTC)
	quota.SetClock(m, func() time.Time { return at })
	putTenant(t, m, kv, "acme", wire.TenantLimits{InputsPerSecond: ptr(int64(3))})
	for i := range 3 {
		if err := m.AddInput(ctx, "acme"); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	err := m.AddInput(ctx, "acme")
	var qe *quota.ExceededError
	if !errors.As(err, &qe) || qe.Reached.Quota != event.QuotaInputsPerSecond || qe.Reached.Used != 3 || qe.Reached.Limit != 3 ||
		qe.Reached.Resets == nil || !qe.Reached.Resets.Equal(at.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("the fourth input: %v", err)
	}
	if !strings.Contains(err.Error(), "--inputs-per-second") {
		t.Errorf("the error says not what to do: %v", err)
	}
	at = at.Add(time.Second) // the next second
	if err := m.AddInput(ctx, "acme"); err != nil {
		t.Fatalf("the next second: %v", err)
	}
	for range 10 {
		if err := m.AddInput(ctx, "beta"); err != nil {
			t.Fatalf("a tenant without the limit: %v", err)
		}
	}
}

// TestStorageQuota: the bytes a tenant's sessions stored, once at its
// limit, stop its LLM calls and refuse its creates, until it is raised.
func TestStorageQuota(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxStorage: ptr(int64(1000))})
	if err := m.Store(ctx, "acme", 600); err != nil {
		t.Fatal(err)
	}
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("under the limit: %+v, %v", q, err)
	}
	if _, err := m.AddSession(ctx, "acme"); err != nil {
		t.Fatalf("a create under the limit: %v", err)
	}
	if err := m.Store(ctx, "acme", 400); err != nil {
		t.Fatal(err)
	}
	q, err := m.Reached(ctx, "acme")
	if err != nil || q == nil || q.Quota != event.QuotaStorage || q.Used != 1000 || q.Resets != nil {
		t.Fatalf("at the limit: %+v, %v", q, err)
	}
	var qe *quota.ExceededError
	if _, err := m.AddSession(ctx, "acme"); !errors.As(err, &qe) || qe.Reached.Quota != event.QuotaStorage || !strings.Contains(err.Error(), "--max-storage") {
		t.Fatalf("a create at the limit: %v", err)
	}
	if u, err := m.Usage(ctx, "acme"); err != nil || u.StorageBytes != 1000 || u.Sessions != 1 {
		t.Fatalf("usage %+v, %v", u, err)
	}
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxStorage: ptr(int64(2000))})
	if q, err := m.Reached(ctx, "acme"); err != nil || q != nil {
		t.Fatalf("raised: %+v, %v", q, err)
	}
}

// TestRunningTurns: with a limit of one running turn, a second turn of the
// tenant waits until the first gives its slot back; with none left, a turn
// waits until its context ends; another tenant's turns are not held.
func TestRunningTurns(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxRunningTurns: ptr(int64(1))})
	first, err := m.TakeTurn(ctx, "acme.s_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waits := make(chan event.QuotaReached, 1)
	taken := make(chan error, 1)
	var second func()
	go func() {
		var err error
		second, err = m.TakeTurn(ctx, "acme.s_2", func(q event.QuotaReached) { waits <- q })
		taken <- err
	}()
	select {
	case q := <-waits:
		if q.Quota != event.QuotaRunningTurns || q.Limit != 1 || q.Used != 1 {
			t.Fatalf("waits at %+v", q)
		}
	case err := <-taken:
		t.Fatalf("the second turn did not wait: %v", err)
	}
	if other, err := m.TakeTurn(ctx, "beta.s_1", nil); err != nil {
		t.Fatalf("another tenant: %v", err)
	} else {
		other()
	}
	first()
	if err := <-taken; err != nil {
		t.Fatalf("the second turn once the first ended: %v", err)
	}
	second()

	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxRunningTurns: ptr(int64(0))})
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := m.TakeTurn(cctx, "acme.s_3", func(event.QuotaReached) { cancel() })
		taken <- err
	}()
	if err := <-taken; !errors.Is(err, context.Canceled) {
		t.Fatalf("a turn with no slot, cancelled: %v", err)
	}
}

// TestRunningTurnsNeverOvershoot: many turns at once against a limit of
// three: never more than three hold a slot, and every one gets its turn.
func TestRunningTurnsNeverOvershoot(t *testing.T) {
	m, kv := meter(t)
	ctx := context.Background()
	putTenant(t, m, kv, "acme", wire.TenantLimits{MaxRunningTurns: ptr(int64(3))})
	var mu sync.Mutex
	holding, most := 0, 0
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			release, err := m.TakeTurn(ctx, fmt.Sprintf("acme.s_%d", i), nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			holding++
			most = max(most, holding)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // the turn's work
			mu.Lock()
			holding--
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	if most > 3 || most == 0 {
		t.Fatalf("%d turns held a slot at once: want at most 3", most)
	}
}
