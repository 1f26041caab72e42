package node

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// TestTenantQuotaCountsCompactions: a compaction's model call counts in
// its tenant's tokens of the day, as a turn's do (its usage is the
// session's: projection folds it), and over the quota a compaction is
// refused before its call (quota_exceeded, which quota), so that
// compacting is no way around a tenant's quota.
func TestTenantQuotaCountsCompactions(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	admin := h.client(h.issue(wire.RoleAdmin, "root"))
	acme, sid := h.acmeSession()
	h.run(acme, sid)
	tokens := func() int64 {
		tenants, err := admin.Tenants(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range tenants {
			if tn.Name == "acme" && tn.Usage != nil {
				return tn.Usage.TokensDay
			}
		}
		return 0
	}
	// acme's one session's usage (the read model's, folded a moment after
	// its records) is what acme's tokens of the day count, before the
	// compaction and after.
	counted := func(what string, more func(total int64) bool) int64 {
		var total int64
		bustest.Eventually(t, 30*time.Second, what, func() bool {
			s, err := acme.Get(h.ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			total = int64(s.Usage.Total())
			return more(total) && tokens() == total
		})
		return total
	}
	before := counted("the turn's tokens counted", func(total int64) bool { return total > 0 })
	if _, err := acme.Compact(h.ctx, sid); err != nil {
		t.Fatal(err)
	}
	used := counted("the compaction's tokens counted", func(total int64) bool { return total > before })

	// Over the day's tokens, a compaction is refused before its call,
	// saying which quota; lifted, it runs.
	h.run(acme, sid)
	used = counted("the second turn's tokens counted", func(total int64) bool { return total > used })
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", TokensPerDay: ptr(used)}); err != nil {
		t.Fatal(err)
	}
	_, err := acme.Compact(h.ctx, sid)
	var ce *client.CommandError
	if !errors.Is(err, client.ErrQuotaExceeded) || !errors.As(err, &ce) || ce.Outcome.Quota == nil || ce.Outcome.Quota.Quota != event.QuotaTokensPerDay {
		t.Fatalf("a compaction over the quota: %v", err)
	}
	if s, err := acme.Get(h.ctx, sid); err != nil || int64(s.Usage.Total()) != used {
		t.Fatalf("the refused compaction called the model: %+v %v", s.Usage, err)
	}
	if _, err := admin.SetTenantLimits(h.ctx, wire.TenantSetRequest{Name: "acme", TokensPerDay: ptr(int64(-1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Compact(h.ctx, sid); err != nil {
		t.Fatalf("a compaction once the quota is lifted: %v", err)
	}
}

// TestTenantStorageCountsToolArtifacts: a tool's output too large for the
// log, which the executor keeps whole in the object store, counts in its
// tenant's storage, as the records do: the artifacts a tenant's sessions
// refer to are its storage too, whoever stored them.
func TestTenantStorageCountsToolArtifacts(t *testing.T) {
	t.Parallel()
	const size = 200_000
	big := tools.Func(tools.Spec{Name: "big"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(strings.Repeat("x", size)), nil
	})
	h := startTenants(t, Options{Provider: mock.Scripted(mock.CallTool("big", `{}`), mock.Say("done")), Tools: tools.MustRegistry(big)})
	ctx := h.ctx
	admin := h.client(h.issue(wire.RoleAdmin, "root"))
	acme, sid := h.acmeSession()
	h.run(acme, sid)
	arts, err := acme.Artifacts(ctx, sid)
	if err != nil || len(arts.Artifacts) != 1 || arts.Artifacts[0].Ref.Size != size {
		t.Fatalf("the tool's output is not an artifact: %+v %v", arts, err)
	}
	bustest.Eventually(t, 30*time.Second, "the artifact in acme's storage", func() bool {
		tenants, err := admin.Tenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range tenants {
			if tn.Name == "acme" {
				return tn.Usage != nil && tn.Usage.StorageBytes >= size
			}
		}
		return false
	})
}
