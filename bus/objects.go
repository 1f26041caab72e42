package bus

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/wire"
)

// The object store tah_artifacts is read and written through the one
// artifact store, tools/artifacts (which a program without a node, tahctl's
// MCP bridge, uses as well): these are its uses over the Bus's bucket.

// PutArtifact stores the content of r in the object store tah_artifacts under
// name and returns the reference to put in an event (tool.finished's artifact,
// artifact.created's ref). A name already used is overwritten: give each
// artifact its own, such as "<sid>/<call id>/output".
func (b *Bus) PutArtifact(ctx context.Context, name string, r io.Reader) (event.ArtifactRef, error) {
	return artifacts.New(b.artifacts).Put(ctx, name, r)
}

// PutArtifactBytes is PutArtifact of a byte slice.
func (b *Bus) PutArtifactBytes(ctx context.Context, name string, data []byte) (event.ArtifactRef, error) {
	return b.PutArtifact(ctx, name, bytes.NewReader(data))
}

// OpenArtifact opens the blob ref points at, in tah_artifacts or the bucket
// ref names. The reader fails with ErrArtifactCorrupt at its end if the
// content does not match ref's size and digest. The caller closes it.
func (b *Bus) OpenArtifact(ctx context.Context, ref event.ArtifactRef) (io.ReadCloser, error) {
	store := b.artifacts
	if ref.Bucket != "" && ref.Bucket != wire.ArtifactBucket {
		var err error
		if store, err = b.js.ObjectStore(ctx, ref.Bucket); err != nil {
			return nil, fmt.Errorf("artifact %s/%s: %w", ref.Bucket, ref.Object, err)
		}
	}
	return artifacts.New(store).Open(ctx, ref)
}

// GetArtifact reads the whole blob ref points at, checking its size and digest
// (ErrArtifactCorrupt).
func (b *Bus) GetArtifact(ctx context.Context, ref event.ArtifactRef) ([]byte, error) {
	r, err := b.OpenArtifact(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
