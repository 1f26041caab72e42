package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Errors of reading artifacts.
var (
	// ErrArtifactCorrupt: the content read differs from the artifact's
	// recorded size or SHA-256. Fetching again may help if the object was
	// being replaced; otherwise the blob is damaged.
	ErrArtifactCorrupt = errors.New("artifact content does not match its record")
)

// Artifacts returns a session's artifacts (tah.api.artifacts), in the order
// they were created.
func (c *Client) Artifacts(ctx context.Context, sid string) (wire.ArtifactsReply, error) {
	if err := validSession(sid); err != nil {
		return wire.ArtifactsReply{}, err
	}
	return request[wire.ArtifactsReply](ctx, c, wire.EndpointArtifacts, wire.SessionRequest{Session: sid})
}

// ArtifactPiece returns one piece of an artifact's content (tah.api.artifact);
// FetchArtifact reads the whole.
func (c *Client) ArtifactPiece(ctx context.Context, req wire.ArtifactRequest) (wire.ArtifactReply, error) {
	if err := validSession(req.Session); err != nil {
		return wire.ArtifactReply{}, err
	}
	return request[wire.ArtifactReply](ctx, c, wire.EndpointArtifact, req)
}

// FetchArtifact writes the whole content of the session's artifact key (its
// id, or its name: the latest of that name) to w, a piece at a time, and
// checks it against the artifact's recorded size and SHA-256
// (ErrArtifactCorrupt). It returns the artifact. On an error, w may hold
// part of the content.
func (c *Client) FetchArtifact(ctx context.Context, sid, key string, w io.Writer) (projection.Artifact, error) {
	h := sha256.New()
	piece := wire.ArtifactPieceMax(c.nc.MaxPayload()) // the node lowers it to what its server takes
	var art projection.Artifact
	var offset int64
	for {
		rep, err := c.ArtifactPiece(ctx, wire.ArtifactRequest{Session: sid, Artifact: key, Offset: offset, Limit: piece})
		if err != nil {
			return art, err
		}
		if offset == 0 {
			art, key = rep.Artifact, rep.Artifact.ID // the pieces after the first are of the same artifact
		}
		if _, err := w.Write(rep.Data); err != nil {
			return art, fmt.Errorf("artifact %s: write: %w", art.ID, err)
		}
		h.Write(rep.Data)
		offset += int64(len(rep.Data))
		if rep.EOF {
			break
		}
		if len(rep.Data) == 0 {
			return art, fmt.Errorf("artifact %s: the node sent an empty piece at offset %d before the end: %w", art.ID, offset, ErrArtifactCorrupt)
		}
	}
	if offset != art.Ref.Size {
		return art, fmt.Errorf("artifact %s is %d bytes, its record says %d: %w", art.ID, offset, art.Ref.Size, ErrArtifactCorrupt)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); art.Ref.SHA256 != "" && sum != art.Ref.SHA256 {
		return art, fmt.Errorf("artifact %s has SHA-256 %s, its record says %s: %w", art.ID, sum, art.Ref.SHA256, ErrArtifactCorrupt)
	}
	return art, nil
}
