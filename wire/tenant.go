package wire

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/event"
)

// A tenant's API (docs/tenancy.md): tah.tapi.<tenant>.<credential>.<endpoint>,
// which a credential of a tenant may call with both tokens its own, so that
// the node reads from the subject whose request it is, and answers it for
// that tenant's sessions only.
const (
	// TenantAPIPrefix starts the subject of every endpoint of a tenant's API.
	TenantAPIPrefix = "tah.tapi."
	// TenantAPIGroup is the micro endpoint group of the tenants' API
	// (TenantAPIPrefix without its dot).
	TenantAPIGroup = "tah.tapi"
)

// TenantAPISubject is the subject of endpoint for the credential named cred
// of tenant: tah.tapi.<tenant>.<cred>.<endpoint>.
func TenantAPISubject(tenant, cred, endpoint string) string {
	return TenantAPIPrefix + tenant + "." + cred + "." + endpoint
}

// TenantAPIEndpointSubject is the subject the node serves endpoint on for
// every tenant and credential: tah.tapi.*.*.<endpoint>.
func TenantAPIEndpointSubject(endpoint string) string { return TenantAPIPrefix + "*.*." + endpoint }

// TenantOfAPISubject returns the tenant, the credential and the endpoint of
// a TenantAPISubject, or false when subj is not one (or its tenant's or
// credential's name is not valid).
func TenantOfAPISubject(subj string) (tenant, cred, endpoint string, ok bool) {
	rest, ok := strings.CutPrefix(subj, TenantAPIPrefix)
	if !ok {
		return "", "", "", false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) != 3 || event.ValidTenant(parts[0]) != nil || ValidCredentialName(parts[1]) != nil || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// TenantEndpoints are the endpoints of a tenant's API: what concerns one
// session, which must be the tenant's, and create and list, which the node
// confines to the tenant. The node's own (status, tools) and the
// credentials' are not among them.
func TenantEndpoints() []string {
	return []string{EndpointCreate, EndpointGet, EndpointList, EndpointFork, EndpointMessages, EndpointSteps, EndpointEvents,
		EndpointRequest, EndpointCompact, EndpointResume, EndpointCancel, EndpointApprove, EndpointDeny, EndpointBudget,
		EndpointArtifacts, EndpointArtifact, EndpointSchedule, EndpointSchedules, EndpointUnschedule, EndpointReplay, EndpointReplayLive,
		EndpointTools}
}

// tenantReadEndpoints are the TenantEndpoints that change nothing: a
// tenant's observer's.
func tenantReadEndpoints() []string {
	return slices.DeleteFunc(slices.Clone(TenantEndpoints()), func(e string) bool { return !slices.Contains(readEndpoints, e) })
}

// TenantRolePermissions is what a credential named name of tenant may do:
// a client drives and reads the tenant's sessions through the tenant's API
// and their inputs, an observer reads them; both receive their deltas,
// refusals and live feed (LiveSubject) and their own replies. No JetStream API at all (a pull names no
// filter, and a direct get reads any record: docs/tenancy.md), no other
// tenant's subject, nothing of the node's. A tool serves the tenant's tools
// named in tools to the tenant's sessions (tenanttool.go); tools are a tool
// credential's only (ErrBadToolNames). Other roles have no tenant's form
// (yet): ErrUnknownRole.
func TenantRolePermissions(tenant string, role Role, name string, tools []string) (Permissions, error) {
	if err := event.ValidTenant(tenant); err != nil {
		return Permissions{}, fmt.Errorf("%v: %w", err, ErrBadTenant)
	}
	if err := ValidCredentialName(name); err != nil {
		return Permissions{}, err
	}
	if role != RoleTool && len(tools) > 0 {
		return Permissions{}, fmt.Errorf("tool names for the %s role (only a tool credential serves tools): %w", role, ErrBadToolNames)
	}
	var pub []string
	agentPub, agentSub := tenantAgentSubjects(tenant, role == RoleClient)
	switch role {
	case RoleTool:
		return tenantToolPermissions(tenant, CredentialInbox(name)+".>", tools)
	case RoleClient: // every endpoint the node serves on a tenant's API, and the inputs
		pub = []string{TenantAPISubject(tenant, name, "*"), "tah.sess." + tenant + ".*.in." + name}
	case RoleObserver:
		for _, e := range tenantReadEndpoints() {
			pub = append(pub, TenantAPISubject(tenant, name, e))
		}
	default:
		return Permissions{}, fmt.Errorf("%q for a tenant (a tenant's credential is a client, an observer or a tool): %w", role, ErrUnknownRole)
	}
	return Permissions{PublishAllow: append(pub, agentPub...),
		SubscribeAllow: append([]string{CredentialInbox(name) + ".>", "tah.sess." + tenant + ".*.delta", "tah.sess." + tenant + ".*.err",
			TenantLiveSubjects(tenant)}, agentSub...)}, nil
}

// A tenant's live feed (docs/tenancy.md): each shard of the log republishes
// the records of tenants' sessions, as they are stored, on
// tah.live.<tenant>.<id>, where only that tenant's credentials (and the
// all-tenant roles) may subscribe. A tenant's credential has no JetStream
// API (TenantRolePermissions), so that is how it follows a session: the
// feed for what comes, tah.tapi.<tenant>.<cred>.events for what came
// before (and for a gap: each republished record's Nats-Last-Sequence
// header is the sequence of the session's record before it).
const (
	// LivePrefix starts every subject of the live feed.
	LivePrefix = "tah.live."
	// LiveSubjects is the filter of every tenant's live feed.
	LiveSubjects = LivePrefix + ">"
)

// LiveSubject is the subject on which the log republishes the records of
// session sid of a tenant (<tenant>.<id>): tah.live.<tenant>.<id>. The
// default tenant's sessions have none: "" for those.
func LiveSubject(sid string) string {
	if event.TenantOf(sid) == "" {
		return ""
	}
	return LivePrefix + sid
}

// TenantLiveSubjects is the filter of tenant's live feed:
// tah.live.<tenant>.*.
func TenantLiveSubjects(tenant string) string { return LivePrefix + tenant + ".*" }

// LiveRePublishSource and LiveRePublishDestination are the RePublish of
// shard k of the log: the subjects of its tenants' sessions
// (tah.evt.<k>.<tenant>.<id>, one token more than a default tenant's) onto
// their LiveSubject.
func LiveRePublishSource(k int) string { return "tah.evt." + strconv.Itoa(k) + ".*.*" }

// LiveRePublishDestination: see LiveRePublishSource.
const LiveRePublishDestination = LivePrefix + "{{wildcard(1)}}.{{wildcard(2)}}"
