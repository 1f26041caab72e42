// Package artifacts is TAH's one artifact store: the blobs too large for an
// event (a large answer or tool output, a file a tool stored) in the NATS
// object store "tah_artifacts". It implements tools.ArtifactStore over a
// jetstream.ObjectStore; the node's bus reads and writes its bucket through
// it, and so does a program without a node (tahctl's MCP bridge). Ensure is
// the one set-up of the bucket: a node's, with its replicas, and Open's.
//
// The smallest use:
//
//	js, _ := jetstream.New(nc)
//	store, err := artifacts.Open(ctx, js) // binds to tah_artifacts, creating it if missing
//	...
//	exec := tools.NewExecutor(reg, tools.Options{Artifacts: store})
//
// Each blob's reference (event.ArtifactRef) carries the bucket, the object name,
// the size and the hex SHA-256 of the content; a read checks them at its end
// (ErrCorrupt).
package artifacts
