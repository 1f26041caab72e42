// Package artifacts stores tool artifacts in the NATS object store: it implements
// tools.ArtifactStore over a jetstream.ObjectStore, by default the bucket
// "tah_artifacts".
//
// The smallest use:
//
//	js, _ := jetstream.New(nc)
//	store, err := artifacts.Open(ctx, js) // binds to tah_artifacts, creating it if missing
//	...
//	exec := tools.NewExecutor(reg, tools.Options{Artifacts: store})
//
// Each blob's reference (event.ArtifactRef) carries the bucket, the object name,
// the size and the hex SHA-256 of the content.
package artifacts
