package node

import "github.com/tah-dev/tah/actors/session"

// Deliver hands cmd to this node's actor of session sid, as an input or a
// takeover's resume would: tests make a node claim a session that another
// node still holds.
func (n *Node) Deliver(sid string, cmd *session.Command) error { return n.sessions.Deliver(sid, cmd) }
