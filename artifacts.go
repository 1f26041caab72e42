package tah

import (
	"context"
	"fmt"
	"io"

	"github.com/tah-dev/tah/projection"
)

// Artifact is a file or blob a session produced: a file a tool wrote, or
// the whole of a tool output or an answer too large for the log.
type Artifact = projection.Artifact

// Artifacts returns the session's artifacts, in the order they were created.
func (s *Session) Artifacts(ctx context.Context) ([]Artifact, error) {
	c, err := s.rt.running()
	if err != nil {
		return nil, err
	}
	r, err := c.Artifacts(ctx, s.id)
	if err != nil {
		return nil, fmt.Errorf("tah: artifacts of %s: %w", s.id, err)
	}
	return r.Artifacts, nil
}

// FetchArtifact writes the content of the session's artifact key (its id,
// or its name: the latest of that name) to w, checked against its recorded
// size and SHA-256, and returns the artifact.
func (s *Session) FetchArtifact(ctx context.Context, key string, w io.Writer) (Artifact, error) {
	c, err := s.rt.running()
	if err != nil {
		return Artifact{}, err
	}
	a, err := c.FetchArtifact(ctx, s.id, key, w)
	if err != nil {
		return a, fmt.Errorf("tah: artifact %s of %s: %w", key, s.id, err)
	}
	return a, nil
}
