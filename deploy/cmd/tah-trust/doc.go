// Command tah-trust makes what a TAH cluster on external NATS servers needs
// before its first start: the trust material (an operator, the system
// account, the TAH account and its signing key), the nodes' credentials, and
// the servers' side of it (the operator's JWT, the system account and the
// accounts' JWTs to preload), for a compose file, a Helm release or servers
// configured by hand.
//
// It is the step docs/operations.md ("Deploy on Kubernetes", "Try it with
// compose") runs once: the NATS servers of an external cluster do not hold
// TAH's trust material, so something must give them the account JWTs, and
// the nodes their credentials. It reads and writes a directory like a node's
// data directory (package auth: trust/, node.creds, admin.creds), and runs
// again without changing what is there: only missing files are written, and
// the files it derives (nats-auth.conf, the Kubernetes manifests) are
// written again from the material.
//
//	tah-trust --dir ./tah-trust --k8s                   # and the Secret and the nats chart's values
//	tah-trust --dir /var/lib/tah/trust --node-dir /var/lib/tah/tah-1 ...
//
// Files in --dir: trust/ (secret: it signs every credential; keep it off the
// cluster), node.creds (role node), admin.creds (role admin: for tahctl),
// ui.creds (role client, named ui: the web UI's), agents.creds (role agents:
// the agent protocol gateway's), ui.token (the web UI's login), and
// nats-auth.conf (no secret: the servers' operator, system account and
// resolver_preload, to include in each server's configuration). With --k8s:
// k8s/tah-creds.yaml (a Secret of the nodes' files) and
// k8s/nats-auth-values.yaml (values for the official nats chart). Each
// --node-dir gets ui.creds, agents.creds and ui.token, which a node reads from
// its data directory.
package main
