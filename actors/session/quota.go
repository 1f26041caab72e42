package session

import (
	"context"
	"errors"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Quotas checks and counts a tenant's use of the model and of storage
// (package quota's Meter, docs/tenancy.md): its sessions' LLM steps stop,
// the turn failing with code quota_exceeded, once a quota per day or its
// storage is used up; each step's tokens and cost, and the bytes of the
// records and artifacts a session wrote, are added once they are stored.
// Only sessions of a tenant (event.TenantOf) are checked and counted.
type Quotas interface {
	// Reached is the quota of tenant that is used up, if one is.
	Reached(ctx context.Context, tenant string) (*event.QuotaReached, error)
	// Spend adds what an LLM call of one of tenant's sessions used.
	Spend(ctx context.Context, tenant string, tokens int64, costUSD float64) error
	// Store adds the bytes one of tenant's sessions stored.
	Store(ctx context.Context, tenant string, bytes int64) error
	// TakeTurn holds one of the tenant's running turns for session sid
	// until release, waiting while the tenant has its limit of them
	// running (or until ctx ends); waiting is told if it waits.
	TakeTurn(ctx context.Context, sid string, waiting func(event.QuotaReached)) (release func(), err error)
}

// quotaTry bounds a check or a count of a quota: a NATS too slow to answer
// it does not hold the turn up (the step's own write waits for NATS
// anyway).
const quotaTry = 5 * time.Second

// checkQuota ends the turn, before an LLM call, when a quota of the
// session's tenant is used up (agent.failed, code quota_exceeded, which
// quota and when it resets), and reports whether it did. A check that
// fails (NATS unavailable) lets the call go on, logged: the quota is
// counted and enforced again on the next step.
func checkQuota(ctx context.Context, a *AgentContext) (ended bool, err error) {
	q := reachedQuota(ctx, a)
	if q == nil {
		return false, nil
	}
	st := a.State()
	return true, a.Append(ctx, event.AgentFailed, event.AgentFailedData{Turn: st.Turn, Code: event.CodeQuotaExceeded, Steps: st.TurnLLMCalls,
		Quota: q, Error: quotaAdvice(*q)})
}

// reachedQuota is the quota of the session's tenant that is used up, or
// nil: none is, the session is no tenant's, or the check failed (NATS
// unavailable: logged, and the call goes on).
func reachedQuota(ctx context.Context, a *AgentContext) *event.QuotaReached {
	tenant := event.TenantOf(a.Session)
	if a.Config.Quotas == nil || tenant == "" {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, quotaTry)
	defer cancel()
	q, err := a.Config.Quotas.Reached(qctx, tenant)
	if err != nil {
		a.log.Warn("the tenant's quotas could not be checked: the step goes on", "session", a.Session, "tenant", tenant, "err", err)
		return nil
	}
	return q
}

// ErrQuotaExceeded: a compact of a session whose tenant used up a quota
// (its tokens or cost of the day, its storage): its model call does not
// run, and nothing is written. A QuotaError says which.
var ErrQuotaExceeded = errors.New("quota exceeded")

// QuotaError is ErrQuotaExceeded with the quota reached.
type QuotaError struct{ Quota event.QuotaReached }

func (e *QuotaError) Error() string { return quotaAdvice(e.Quota) }

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// takeTurn holds one of the tenant's running turns for the loop's LLM and
// tool calls (Quotas.TakeTurn): it waits while the tenant has its limit of
// them running, until one ends or ctx does (a cancel, the node stopping:
// then ok is false and the loop's next round records what ended it). A
// slot that cannot be taken (NATS unavailable) lets the turn go on,
// logged. release gives it back.
func takeTurn(ctx context.Context, a *AgentContext) (release func(), ok bool) {
	if a.Config.Quotas == nil || event.TenantOf(a.Session) == "" {
		return func() {}, true
	}
	release, err := a.Config.Quotas.TakeTurn(ctx, a.Session, func(q event.QuotaReached) {
		a.log.Info("the turn waits: its tenant's running turns are at their limit", "session", a.Session, "tenant", q.Tenant, "limit", q.Limit)
		// What the loop staged (the turn's start, its tools' results) is
		// written now, so that the log and its readers see the turn that
		// waits, not only once it goes on.
		if err := a.Flush(ctx); err != nil {
			a.log.Warn("the turn's staged events were not written before it waits", "session", a.Session, "err", err)
		}
	})
	if ctx.Err() != nil {
		return func() {}, false
	}
	if err != nil {
		a.log.Warn("the tenant's running turns could not be counted: the turn goes on", "session", a.Session, "err", err)
		return func() {}, true
	}
	return release, true
}

// quotaAdvice is agent.failed's error for quota q: what was reached, and
// what to do next.
func quotaAdvice(q event.QuotaReached) string {
	when := "once an admin raises it (tahctl tenant set " + q.Tenant + ")"
	if q.Resets != nil {
		when = "once it resets, or " + when
	}
	return q.String() + "; the session's next input runs " + when
}

// spent counts in the tenant's quotas what the session's LLM steps used
// since the last count: the session's usage and cost (projection.State)
// grown since, once the records that hold them are stored. A count that
// fails is logged and lost: the quota counts a little less, nothing
// stored is touched.
func (a *AgentContext) spent(ctx context.Context) {
	tenant := event.TenantOf(a.Session)
	if a.Config.Quotas == nil || tenant == "" {
		return
	}
	st := a.State()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), quotaTry)
	defer cancel()
	if stored := a.writer.Written() + a.artifactBytes.Load(); stored > a.counted.bytes {
		if err := a.Config.Quotas.Store(qctx, tenant, stored-a.counted.bytes); err != nil {
			a.log.Warn("a record's bytes were not counted in its tenant's storage", "session", a.Session, "tenant", tenant, "err", err)
		}
		a.counted.bytes = stored
	}
	tokens := int64(st.Usage.Total() - a.counted.usage.Total())
	usd := st.Cost.USD - a.counted.usd
	if tokens <= 0 && usd <= 0 {
		return
	}
	a.counted.usage, a.counted.usd = st.Usage, st.Cost.USD
	if err := a.Config.Quotas.Spend(qctx, tenant, tokens, usd); err != nil {
		a.log.Warn("a step's use was not counted in its tenant's quotas", "session", a.Session, "tenant", tenant, "tokens", tokens, "err", err)
	}
}

// countedUse is the session's usage and cost as the quotas last counted
// them: at first, what the log held when the session was loaded (counted
// by the nodes that wrote those steps); bytes is what this context's
// writer and artifacts stored, as counted.
type countedUse struct {
	usage llm.Usage
	usd   float64
	bytes int64
}
