// Package upgrade moves a TAH cluster of the user-and-password era into an
// operator-mode cluster: it copies every TAH stream, KV bucket and object
// store of the old cluster's account ($G, the account of a server without
// operator) into the TAH account of the new one. A single node's data
// directory is moved by a rename at its first start (package bus); a
// cluster's cannot be, because its JetStream meta group records the account
// of every stream, so its sessions are copied over the wire instead, with
// `tahctl upgrade-cluster`.
//
// The event log keeps its sequences (events and checkpoints refer to them):
// each record is written at the sequence it had, or the copy stops. The
// node's runtime state (presence, locks) is not copied: the new nodes write
// their own.
//
//	old, _ := upgrade.ConnectLegacy(ctx, "nats://old-host:4222", "old/.tah/credentials.json")
//	rep, err := upgrade.Copy(ctx, oldJS, newJS, func(s upgrade.Stream) { fmt.Println(s) })
package upgrade
