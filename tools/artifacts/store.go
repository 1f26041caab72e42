package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Bucket is the object store bucket of TAH's artifacts (wire.ArtifactBucket).
const Bucket = wire.ArtifactBucket

// Errors of the store.
var (
	// ErrCorrupt: an artifact whose size or SHA-256 differs from its
	// reference; a reader of it fails with it at its end.
	ErrCorrupt = errors.New("artifact does not match its reference")
	// ErrSettings: with Setup.CheckOnly, the bucket exists with other
	// settings than the ones asked for.
	ErrSettings = errors.New("the bucket's settings differ")
)

// Store keeps artifacts in one object store bucket.
type Store struct {
	obs jetstream.ObjectStore
}

var _ tools.ArtifactStore = (*Store)(nil)

// New returns a store over obs.
func New(obs jetstream.ObjectStore) *Store { return &Store{obs: obs} }

// Open binds to the bucket Bucket, creating it with one replica when it does
// not exist yet (a node's setup may have created it with its own settings,
// which are left as they are).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	obs, err := Ensure(ctx, js, Setup{})
	if err != nil {
		return nil, fmt.Errorf("artifacts: open bucket %s: %w", Bucket, err)
	}
	return New(obs), nil
}

// Setup is how Ensure treats the bucket.
type Setup struct {
	// Replicas the bucket is created with; an existing bucket with other
	// replicas is updated to them. 0: one replica for a bucket it creates,
	// and an existing bucket is left as it is (a program that is not a node
	// takes the bucket as the nodes set it up).
	Replicas int
	// CheckOnly creates and updates nothing: a missing bucket fails with
	// jetstream.ErrBucketNotFound, one with other replicas with ErrSettings.
	CheckOnly bool
}

// Ensure is the one set-up of the bucket Bucket, a node's (bus, with its
// replicas) and a program's without one (Open): it binds to the bucket,
// creating or updating it as s says. (CreateOrUpdateObjectStore is not used:
// run by several nodes at once on a forming cluster, its update can hang.)
// Its errors are jetstream's, or ErrSettings, for the caller to put in its
// words.
func Ensure(ctx context.Context, js jetstream.JetStream, s Setup) (jetstream.ObjectStore, error) {
	cfg := jetstream.ObjectStoreConfig{
		Bucket: Bucket, Description: "TAH artifacts and large tool outputs",
		Storage: jetstream.FileStorage, Replicas: max(s.Replicas, 1),
	}
	obs, err := js.ObjectStore(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if s.CheckOnly {
			return nil, err
		}
		obs, err = js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(ctx, Bucket)
		}
		if err == nil {
			return obs, nil
		}
	}
	if err != nil || s.Replicas == 0 {
		return obs, err
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.Replicas() != cfg.Replicas {
		if s.CheckOnly {
			return nil, fmt.Errorf("object store %s has replicas %d, want %d: %w", Bucket, st.Replicas(), cfg.Replicas, ErrSettings)
		}
		return js.UpdateObjectStore(ctx, cfg)
	}
	return obs, nil
}

// Put stores what r yields under name, replacing an object of that name, and
// returns the reference to put in an event (tool.finished's artifact,
// artifact.created's ref): the bucket, the name, the size and the hex
// SHA-256 of the content. Give each artifact a name of its own, such as
// tools.ArtifactName's.
func (s *Store) Put(ctx context.Context, name string, r io.Reader) (event.ArtifactRef, error) {
	if name == "" {
		return event.ArtifactRef{}, fmt.Errorf("put artifact: empty name")
	}
	h := sha256.New()
	info, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, io.TeeReader(r, h))
	if err != nil {
		return event.ArtifactRef{}, fmt.Errorf("put artifact %q: %w", name, err)
	}
	return event.ArtifactRef{
		Bucket: info.Bucket,
		Object: info.Name,
		Size:   int64(info.Size),
		SHA256: hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// Open returns the content of the artifact ref names, read from this store's
// bucket (ref.Bucket is not consulted). The reader fails with ErrCorrupt at
// its end if the content does not match ref's size and digest (a digest
// left empty is not checked). It returns an error wrapping
// jetstream.ErrObjectNotFound when there is none. The caller closes it.
func (s *Store) Open(ctx context.Context, ref event.ArtifactRef) (io.ReadCloser, error) {
	r, err := s.obs.Get(ctx, ref.Object)
	if err != nil {
		return nil, fmt.Errorf("artifact %s/%s: %w", ref.Bucket, ref.Object, err)
	}
	return &checkedReader{r: r, ref: ref, h: sha256.New()}, nil
}

// checkedReader reads an artifact, checking at its end that it is the one
// its reference describes.
type checkedReader struct {
	r   io.ReadCloser
	ref event.ArtifactRef
	h   hash.Hash
	n   int64
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	_, _ = c.h.Write(p[:n])
	if err == io.EOF {
		if c.n != c.ref.Size {
			return n, fmt.Errorf("artifact %s/%s is %d bytes, its reference says %d: %w", c.ref.Bucket, c.ref.Object, c.n, c.ref.Size, ErrCorrupt)
		}
		if sum := hex.EncodeToString(c.h.Sum(nil)); c.ref.SHA256 != "" && sum != c.ref.SHA256 {
			return n, fmt.Errorf("artifact %s/%s has SHA-256 %s, its reference says %s: %w", c.ref.Bucket, c.ref.Object, sum, c.ref.SHA256, ErrCorrupt)
		}
	}
	return n, err
}

func (c *checkedReader) Close() error { return c.r.Close() }
