package event

import (
	"fmt"
	"strconv"
	"time"
)

// CodeQuotaExceeded: the work was over one of its tenant's quotas
// (docs/tenancy.md): agent.failed's Quota, or the API's error, says which,
// its limit and when it resets. Nothing stored is touched: the next turn
// runs once the quota allows it (a new day, or a limit raised).
const CodeQuotaExceeded = "quota_exceeded"

// The quotas of a tenant, as QuotaReached.Quota names them.
const (
	// QuotaSessions: the sessions its credentials made (create, fork,
	// a replay's live session), for good.
	QuotaSessions = "sessions"
	// QuotaTokensPerDay: the tokens its sessions' LLM calls used, per UTC
	// day.
	QuotaTokensPerDay = "tokens_per_day"
	// QuotaCostPerDay: what its sessions' LLM calls cost, in US dollars,
	// per UTC day.
	QuotaCostPerDay = "cost_usd_per_day"
	// QuotaInputsPerSecond: the inputs its sessions are sent (but
	// cancels) in a second of the clock.
	QuotaInputsPerSecond = "inputs_per_second"
	// QuotaStorage: the bytes its sessions keep in the log (their
	// records) and in the object store (what was too large for the log),
	// for good.
	QuotaStorage = "storage_bytes"
	// QuotaRunningTurns: the turns of its sessions working at once (an
	// LLM call or a tool call on their way; a turn that waits for an
	// approval or a sub-agent holds none). A turn over it waits.
	QuotaRunningTurns = "running_turns"
)

// QuotaReached says which quota of which tenant was reached, at what
// figure, and when it resets.
type QuotaReached struct {
	Tenant string `json:"tenant"`
	Quota  string `json:"quota"`
	// Limit is the quota, Used what the tenant had used when it was
	// checked: sessions, tokens or US dollars, as Quota says.
	Limit float64 `json:"limit"`
	Used  float64 `json:"used"`
	// Resets is when the quota's period ends (the next UTC midnight for
	// a quota per day); absent for a quota on a total, which resets only
	// when the limit is raised.
	Resets *time.Time `json:"resets,omitempty"`
}

// String says it for people: "tenant acme's tokens_per_day quota of 1000
// is used (1042), until 2026-12-06T00:00:00Z".
func (q QuotaReached) String() string {
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	s := fmt.Sprintf("tenant %s's %s quota of %s is used (%s)", q.Tenant, q.Quota, num(q.Limit), num(q.Used))
	if q.Resets != nil {
		s += ", until " + q.Resets.UTC().Format(time.RFC3339)
	}
	return s
}
