// Package quota counts what each tenant uses and checks it against the
// limits of its entry in the registry (docs/tenancy.md, step 3).
//
// The counts are JetStream's own distributed counters (streams that allow
// message counters, nats-server 2.12+: a publish with the header Nats-Incr
// adds to its subject's value, and the acknowledgement carries the new
// total), one subject per tenant and quota (wire.UsageSessionsSubject,
// wire.UsageDaySubject), so that every node of a cluster adds to and reads
// the same figure with no coordination of its own. The limits are the
// tenants' entries of the registry of credentials (wire.CredsBucket,
// Tenant.Limits), which a Meter follows with a KV watch: a limit set on
// one node applies on every node without a restart.
//
// What is checked, and when:
//   - sessions: a create adds one first and takes it back when the new
//     total is over the limit (or the create failed), so that two nodes'
//     creates at once cannot both take the last one;
//   - tokens and cost per UTC day: checked before each LLM call, added
//     after the call's record is stored, by a flusher of the Meter's own
//     that sends each counter's amounts added up, so that no step waits
//     for a durable write of its count; a check counts what is not sent
//     yet, and reads each counter at most once a second (readFresh). Row
//     12 of make bench measured why: with the day's quotas set, a durable
//     write and two reads a step made a tenant's turn 1.55× the default
//     tenant's; with neither on the step's path, 1.07×. A tenant may overshoot by the calls
//     already running, and by what other nodes spent in the last second;
//     it never loses what is stored.
//
// A request over a quota fails with an *ExceededError (errors.Is
// ErrExceeded), which says which quota, its limit, what was used and when
// it resets.
package quota
