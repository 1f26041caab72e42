// Package agents makes TAH's sessions agents of the Synadia Agent Protocol
// for NATS (v0.3; docs/agent-protocol.md maps it section by section), as
// the first host whose streams survive a crash.
//
// The Gateway runs in every node on a connection of its own (a credential
// of the agents role, which NATS forbids every subject of TAH's): the
// micro service "agents" with a controller instance ("new": a prompt starts
// a session, or continues the one its envelope's "session" names) and an
// instance for each session whose actor runs on the node, heartbeats, and
// status replies. A tenant's sessions are agents owned by tenant-<tenant>
// (wire.TenantAgentOwner): a controller per tenant of the registry
// (Gateway.TenantActive), which makes and continues that tenant's sessions
// only, and an instance per active session of the tenant's, named by its id
// within the tenant. A prompt is admitted there: parsed, acknowledged, and
// stored as a run whose input carries the caller's reply subject.
//
// Streams is the other half, in the node that works on the turn:
// turn.started records the caller, and whichever node runs the turn (the
// first, the one that resumes it after a crash, the one that continues it
// after an approval) streams its deltas, tool activity, approval queries
// and end to the caller's reply subject. A query's reply subject is a
// subject of the stream TAH_ANSWERS, so that the answer is kept until a
// node turns it into an approve or a deny.
package agents
