// Package auth is TAH's trust material for NATS decentralized JWT auth: an
// operator, the system account, the TAH account (JetStream on, unlimited)
// with a signing key, and the user credentials (.creds files: a user JWT and
// its nkey seed) that nats.go, nats.js and the nats CLI take as they are.
//
// A node that embeds its NATS server keeps the material in its data
// directory (see Ensure: <data>/trust, mode 0700, seeds 0600) and runs the
// server in operator mode with it (package bus: the operator's JWT trusted,
// the system account, a full directory account resolver holding
// SystemJWT and AccountJWT), so that servers joined in a cluster share
// account updates over the system account. The package does not link the
// NATS server, so that tahctl, which issues credentials with it, stays small. The node connects as its own user
// (<data>/node.creds); <data>/admin.creds lets tahctl on the same machine in.
// No seed is ever logged; the node's credential never leaves the data
// directory. IssueFor signs a user JWT for a public key whose seed stays
// with the caller (the node's credentials API). Revoke and Merge never
// sign an account JWT that lacks a revocation of another copy: each node of
// a cluster holds its own trust/tah.jwt, and servers keep the newest.
//
// The smallest use:
//
//	t, err := auth.Ensure(".tah") // generated at first start, read after
//	u, err := auth.RoleUser(wire.RoleClient, "alice", nil)
//	issued, err := t.Issue(u)     // issued.Creds: alice's .creds file
//	// nats.Connect(url, nats.UserCredentials(auth.NodeCredsPath(".tah")))
package auth
