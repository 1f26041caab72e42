package session

import (
	"fmt"
	"sync"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/buildinfo"
)

// buildVersion is this node's build, as turn.started's definition names
// it: read once, it does not change while the process runs.
var buildVersion = sync.OnceValue(func() string { return buildinfo.Read().String() })

// loopName names a loop in a definition: its Go type.
func loopName(l Loop) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("%T", l)
}

// definition is the digest of what defines a's agent for the turn it
// begins: its configuration, the tools it is offered, its provider and
// loop, this node's build. nil (and a warning) when it cannot be made: a
// turn does not fail for want of its digest.
func (a *AgentContext) definition() *event.AgentDefinition {
	provider := ""
	if a.Provider != nil {
		provider = a.Provider.Name()
	}
	d, err := event.NewAgentDefinition(a.Config.eventConfig(), a.offeredTools(), provider, a.loop, buildVersion())
	if err != nil {
		a.log.Warn("the turn's definition is not recorded", "session", a.Session, "err", err)
		return nil
	}
	return &d
}
