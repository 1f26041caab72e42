package nodecmd

import (
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

// agentsLine is the banner's line about the agent gateway, which the node
// brings up (node.Options.Agents).
func agentsLine(cfg config.Config, n *node.Node) string {
	switch {
	case !cfg.Agents.Enabled:
		return "off (--agents=false)"
	case n.GatewayErr() != nil:
		return "off: " + n.GatewayErr().Error()
	}
	prompt := wire.AgentSubject(wire.AgentVerbPrompt, cfg.Agents.Owner, wire.AgentController)
	return prompt + " (the Synadia Agent Protocol " + wire.AgentsProtocolVersion + ": docs/agent-protocol.md)"
}
