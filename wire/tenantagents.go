package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
)

// A tenant's agents (docs/agent-protocol.md, "A tenant's agents"): the
// sessions of tenant acme are agents owned by tenant-acme, on the
// protocol's own subjects (agents.<verb>.tah.tenant-acme.<name>: the
// controller "new", a session acme.<id>'s instance <id>), which a tenant's
// credential may use for its own tenant only. A deployment's owner may not
// start with TenantAgentOwnerPrefix (ValidAgentOwner), so that no tenant's
// permissions reach the default tenant's agents, whatever it is called.
const (
	// TenantAgentOwnerPrefix starts the owner token of a tenant's agents.
	TenantAgentOwnerPrefix = "tenant-"
	// TenantAnswerStream keeps the answers to the queries of tenants'
	// sessions (AnswerStream's, for ids of two tokens), until a node turned
	// each into an approve or a deny.
	TenantAnswerStream = "TAH_TANSWERS"
	// TenantAnswerSubjects is the filter of TenantAnswerStream's subjects:
	// tah.sess.<tenant>.<id>.answer.<call>.
	TenantAnswerSubjects = "tah.sess.*.*.answer.*"
	// TenantAnswerConsumer is the durable consumer the nodes share on
	// TenantAnswerStream.
	TenantAnswerConsumer = "tah_tanswers"
)

// ErrBadAgentOwner: a deployment's agents owner that is not one subject
// token, or that a tenant's agents could have (TenantAgentOwnerPrefix).
var ErrBadAgentOwner = errors.New("invalid agents owner")

// ValidAgentOwner reports, wrapping ErrBadAgentOwner, why owner cannot be a
// deployment's agents owner (agents.owner).
func ValidAgentOwner(owner string) error {
	if err := ValidCredentialName(owner); err != nil {
		return fmt.Errorf("%w: %w", ErrBadAgentOwner, err)
	}
	if strings.HasPrefix(owner, TenantAgentOwnerPrefix) {
		return fmt.Errorf("%q: an owner starting with %q is a tenant's agents': %w", owner, TenantAgentOwnerPrefix, ErrBadAgentOwner)
	}
	return nil
}

// TenantAgentOwner is the owner token of tenant's agents: tenant-<tenant>.
func TenantAgentOwner(tenant string) string { return TenantAgentOwnerPrefix + tenant }

// AgentOf is the owner and the instance name of session sid's agent
// instance, given the deployment's owner: the default tenant's sessions
// are owner's, named by their id; a tenant's are TenantAgentOwner's, named
// by their id within the tenant.
func AgentOf(owner, sid string) (string, string) {
	if tenant := event.TenantOf(sid); tenant != "" {
		return TenantAgentOwner(tenant), strings.TrimPrefix(sid, tenant+".")
	}
	return owner, sid
}

// tenantAgentSubjects are the protocol's subjects a client (prompt) or an
// observer of tenant may publish and subscribe to: its own agents' only.
func tenantAgentSubjects(tenant string, prompt bool) (pub, sub []string) {
	owner := TenantAgentOwner(tenant)
	pub = []string{AgentSubject(AgentVerbStatus, owner, ">")}
	if prompt {
		pub = append(pub, AgentSubject(AgentVerbPrompt, owner, ">"), "tah.sess."+tenant+".*.answer.*")
	}
	return pub, []string{AgentSubject(AgentVerbHeartbeat, owner, "*")}
}
