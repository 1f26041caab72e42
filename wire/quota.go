package wire

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tah-dev/tah/event"
)

// A tenant's quotas (docs/tenancy.md) are the limits of its entry in the
// registry (Tenant.Limits), set with tah.api.creds.tenants.set; what it
// used is counted by the nodes in the usage streams, with JetStream's
// distributed counters (a stream that allows message counters: a publish
// with the header Nats-Incr adds to its subject's value).
const (
	// EndpointTenantsSet changes a tenant's limits (admin only).
	EndpointTenantsSet = "creds.tenants.set"

	// UsageStream holds the counters that last: a tenant's sessions
	// (UsageSessionsSubject) and the bytes they keep (UsageStorageSubject).
	UsageStream = "TAH_USAGE"
	// UsageDayStream holds the counters of a UTC day (UsageDaySubject),
	// kept two days: a day's counter is read on its day only.
	UsageDayStream = "TAH_USAGE_DAY"
	// UsageSubjects and UsageDaySubjects are their subjects.
	UsageSubjects    = "tah.usage.*.total.*"
	UsageDaySubjects = "tah.usage.*.day.>"
	// UsageSecStream holds the counters of a second (UsageSecSubject), in
	// memory, for two minutes: a rate needs no disk.
	UsageSecStream   = "TAH_USAGE_SEC"
	UsageSecSubjects = "tah.usage.*.sec.*"
	// TurnStream holds a tenant's slots of running turns (TurnSubject), in
	// memory: a slot with a message is taken, by the turn that published it
	// with a compare-and-set; its TTL, which its owner renews while the
	// turn works, frees a dead node's.
	TurnStream   = "TAH_TURNS"
	TurnSubjects = "tah.turns.>"

	// UsageDayTokens and UsageDayCost are the counters of a day: tokens,
	// and cost in millionths of a US dollar (a counter is an integer).
	UsageDayTokens = "tokens"
	UsageDayCost   = "cost_microusd"

	// HeaderIncr is the header of a publish that adds to a counter.
	HeaderIncr = "Nats-Incr"
)

// APIErrQuota is the API's error code of a request over one of its
// tenant's quotas: its reply's body is a QuotaError.
const APIErrQuota = "429"

// UsageSessionsSubject is the counter of tenant's sessions.
func UsageSessionsSubject(tenant string) string { return "tah.usage." + tenant + ".total.sessions" }

// UsageStorageSubject is the counter of the bytes tenant's sessions keep.
func UsageStorageSubject(tenant string) string { return "tah.usage." + tenant + ".total.bytes" }

// UsageDaySubject is tenant's counter named what (UsageDayTokens,
// UsageDayCost) of the UTC day of t: tah.usage.<tenant>.day.<yyyymmdd>.<what>.
func UsageDaySubject(tenant string, t time.Time, what string) string {
	return "tah.usage." + tenant + ".day." + t.UTC().Format("20060102") + "." + what
}

// UsageSecSubject is tenant's counter of inputs in the second of t (Unix
// time): tah.usage.<tenant>.sec.<unix seconds>.
func UsageSecSubject(tenant string, t time.Time) string {
	return "tah.usage." + tenant + ".sec." + strconv.FormatInt(t.Unix(), 10)
}

// TurnSubject is tenant's slot n of its running turns (0 to its limit
// less one): tah.turns.<tenant>.<n>.
func TurnSubject(tenant string, n int64) string {
	return "tah.turns." + tenant + "." + strconv.FormatInt(n, 10)
}

// TenantLimits are a tenant's quotas; a field absent has no limit.
type TenantLimits struct {
	// MaxSessions bounds the sessions its credentials make (create, fork,
	// a replay's live session; not its sessions' sub-agents' children,
	// which are the work of a turn).
	MaxSessions *int64 `json:"max_sessions,omitempty"`
	// TokensPerDay bounds the tokens of its sessions' LLM calls per UTC
	// day, CostPerDay their cost in US dollars.
	TokensPerDay *int64   `json:"tokens_per_day,omitempty"`
	CostPerDay   *float64 `json:"cost_usd_per_day,omitempty"`
	// InputsPerSecond bounds the inputs its sessions are sent (every
	// command but cancel) in a second of the clock; an input over it is
	// refused (code quota_exceeded).
	InputsPerSecond *int64 `json:"inputs_per_second,omitempty"`
	// MaxStorage bounds the bytes its sessions keep: their records in the
	// log and what was too large for it in the object store. Over it, a
	// create is refused and a turn stops before its next LLM call.
	MaxStorage *int64 `json:"max_storage_bytes,omitempty"`
	// MaxRunningTurns bounds its sessions' turns working at once; a turn
	// over it waits, before its LLM call, until another's ends or pauses.
	MaxRunningTurns *int64 `json:"max_running_turns,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l TenantLimits) IsZero() bool {
	return l.MaxSessions == nil && l.TokensPerDay == nil && l.CostPerDay == nil && l.InputsPerSecond == nil && l.MaxStorage == nil &&
		l.MaxRunningTurns == nil
}

// TenantUsage is what a tenant used: its sessions, and today's tokens and
// cost (UTC); in tah.api.creds.tenants.ls and set.
type TenantUsage struct {
	Sessions     int64   `json:"sessions"`
	StorageBytes int64   `json:"storage_bytes"`
	TokensDay    int64   `json:"tokens_today"`
	CostDayUSD   float64 `json:"cost_usd_today"`
}

// TenantSetRequest changes tenant Name's limits (tah.api.creds.tenants.set):
// a field absent is left as it is, a negative one removes the limit, any
// other is the new limit (0 allows nothing more).
type TenantSetRequest struct {
	Name         string   `json:"name"`
	MaxSessions  *int64   `json:"max_sessions,omitempty"`
	TokensPerDay *int64   `json:"tokens_per_day,omitempty"`
	CostPerDay   *float64 `json:"cost_usd_per_day,omitempty"`
	InputsPerSec *int64   `json:"inputs_per_second,omitempty"`
	MaxStorage   *int64   `json:"max_storage_bytes,omitempty"`
	MaxTurns     *int64   `json:"max_running_turns,omitempty"`
}

// Apply returns limits l changed as r says.
func (r TenantSetRequest) Apply(l TenantLimits) TenantLimits {
	if r.MaxSessions != nil {
		l.MaxSessions = nonNegative(r.MaxSessions)
	}
	if r.TokensPerDay != nil {
		l.TokensPerDay = nonNegative(r.TokensPerDay)
	}
	if r.InputsPerSec != nil {
		l.InputsPerSecond = nonNegative(r.InputsPerSec)
	}
	if r.MaxStorage != nil {
		l.MaxStorage = nonNegative(r.MaxStorage)
	}
	if r.MaxTurns != nil {
		l.MaxRunningTurns = nonNegative(r.MaxTurns)
	}
	if r.CostPerDay != nil {
		l.CostPerDay = r.CostPerDay
		if *r.CostPerDay < 0 {
			l.CostPerDay = nil
		}
	}
	return l
}

// Validate refuses a request that changes nothing.
func (r TenantSetRequest) Validate() error {
	if r.MaxSessions == nil && r.TokensPerDay == nil && r.CostPerDay == nil && r.InputsPerSec == nil && r.MaxStorage == nil && r.MaxTurns == nil {
		return fmt.Errorf("no limit given: set max_sessions, max_storage_bytes, max_running_turns, tokens_per_day, cost_usd_per_day or inputs_per_second (negative: no limit)")
	}
	return nil
}

func nonNegative(v *int64) *int64 {
	if *v < 0 {
		return nil
	}
	return v
}

// TenantSetReply is the tenant with its limits as they now are.
type TenantSetReply struct {
	Tenant Tenant `json:"tenant"`
}

// QuotaError is the body of an APIErrQuota reply: Error is
// event.CodeQuotaExceeded, the rest says which quota of which tenant, its
// limit, what was used, and when it resets (absent: when it is raised).
type QuotaError struct {
	Error string `json:"error"`
	event.QuotaReached
}
