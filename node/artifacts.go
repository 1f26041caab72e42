package node

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// apiArtifacts is tah.api.artifacts: the session's artifacts, from the read
// model once it has folded the session's log so far.
func (n *Node) apiArtifacts(ctx context.Context, req wire.SessionRequest) (wire.ArtifactsReply, error) {
	if err := n.readModel(ctx, req.Session); err != nil {
		return wire.ArtifactsReply{}, err
	}
	arts, err := n.store.Artifacts(ctx, req.Session)
	return wire.ArtifactsReply{Session: req.Session, Artifacts: arts}, err
}

// apiArtifact is tah.api.artifact: a piece of an artifact's content, read
// from the object store. A piece from an offset reads the blob from its
// start (an object store reads forward only), so a client asks for pieces
// as large as the server takes (wire.ArtifactPieceMax).
func (n *Node) apiArtifact(ctx context.Context, req wire.ArtifactRequest) (wire.ArtifactReply, error) {
	if req.Artifact == "" {
		return wire.ArtifactReply{}, badRequest("no artifact given: set \"artifact\" to an artifact's id or name (tahctl artifacts %s lists them)", req.Session)
	}
	if req.Offset < 0 || req.Limit < 0 {
		return wire.ArtifactReply{}, badRequest("offset and limit must not be negative")
	}
	if err := n.readModel(ctx, req.Session); err != nil {
		return wire.ArtifactReply{}, err
	}
	arts, err := n.store.Artifacts(ctx, req.Session)
	if err != nil {
		return wire.ArtifactReply{}, err
	}
	art, ok := findArtifact(arts, req.Artifact)
	if !ok {
		return wire.ArtifactReply{}, &apiError{wire.APIErrNotFound, fmt.Errorf("session %s has no artifact %q (tahctl artifacts %s lists them)", req.Session, req.Artifact, req.Session)}
	}
	if req.Offset > art.Ref.Size {
		return wire.ArtifactReply{}, badRequest("offset %d is past the end of artifact %s (%d bytes)", req.Offset, art.ID, art.Ref.Size)
	}
	limit := req.Limit
	if limit == 0 {
		limit = wire.ArtifactChunkMax
	}
	limit = min(limit, wire.ArtifactPieceMax(n.bus.Conn().MaxPayload()))
	data, eof, err := n.readArtifact(ctx, art, req.Offset, limit)
	if err != nil {
		return wire.ArtifactReply{}, err
	}
	return wire.ArtifactReply{Session: req.Session, Artifact: art, Offset: req.Offset, Data: data, EOF: eof}, nil
}

// findArtifact is the artifact of id key or, failing that, the latest of name key.
func findArtifact(arts []projection.Artifact, key string) (projection.Artifact, bool) {
	for _, a := range arts {
		if a.ID == key {
			return a, true
		}
	}
	for i := len(arts) - 1; i >= 0; i-- {
		if arts[i].Name == key {
			return arts[i], true
		}
	}
	return projection.Artifact{}, false
}

// readArtifact reads up to limit bytes of art's blob from offset; eof says
// whether they end it. A blob that differs from its reference fails with
// bus.ErrArtifactCorrupt once read to its end; one no longer in the store is
// APIErrNotFound.
func (n *Node) readArtifact(ctx context.Context, art projection.Artifact, offset int64, limit int) ([]byte, bool, error) {
	r, err := n.bus.OpenArtifact(ctx, art.Ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, false, &apiError{wire.APIErrNotFound, fmt.Errorf("artifact %s (%s) is no longer in the object store %s: %w", art.ID, art.Ref.Object, art.Ref.Bucket, err)}
	}
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	if _, err := io.CopyN(io.Discard, r, offset); err != nil {
		return nil, false, fmt.Errorf("artifact %s: skip to offset %d: %w", art.ID, offset, err)
	}
	buf := make([]byte, limit)
	got, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return buf[:got], true, nil
	case errors.Is(err, bus.ErrArtifactCorrupt):
		return nil, false, fmt.Errorf("artifact %s: %w", art.ID, err)
	case err != nil:
		return nil, false, fmt.Errorf("artifact %s: read: %w", art.ID, err)
	}
	return buf, offset+int64(got) >= art.Ref.Size, nil
}
