package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// Bucket is the object store bucket of TAH's artifacts.
const Bucket = "tah_artifacts"

// Store keeps artifacts in one object store bucket.
type Store struct {
	obs jetstream.ObjectStore
}

var _ tools.ArtifactStore = (*Store)(nil)

// New returns a store over obs.
func New(obs jetstream.ObjectStore) *Store { return &Store{obs: obs} }

// Open binds to the bucket Bucket, creating it with default settings when it does
// not exist yet (the node's bus setup may have created it with its own).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	obs, err := js.ObjectStore(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      Bucket,
			Description: "TAH artifacts: tool outputs and files",
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("artifacts: open bucket %s: %w", Bucket, err)
	}
	return New(obs), nil
}

// Put stores what r yields under name, replacing an object of that name.
func (s *Store) Put(ctx context.Context, name string, r io.Reader) (event.ArtifactRef, error) {
	h := sha256.New()
	info, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, io.TeeReader(r, h))
	if err != nil {
		return event.ArtifactRef{}, fmt.Errorf("artifacts: put %q: %w", name, err)
	}
	return event.ArtifactRef{
		Bucket: info.Bucket,
		Object: info.Name,
		Size:   int64(info.Size),
		SHA256: hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// Open returns the content of the artifact ref names, read from this store's
// bucket (ref.Bucket is not consulted). The caller closes it.
// It returns an error wrapping jetstream.ErrObjectNotFound when there is none.
func (s *Store) Open(ctx context.Context, ref event.ArtifactRef) (io.ReadCloser, error) {
	res, err := s.obs.Get(ctx, ref.Object)
	if err != nil {
		return nil, fmt.Errorf("artifacts: get %q: %w", ref.Object, err)
	}
	return res, nil
}
