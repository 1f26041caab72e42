package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// PutArtifact stores the content of r in the object store tah_artifacts under
// name and returns the reference to put in an event (tool.finished's artifact,
// artifact.created's ref). A name already used is overwritten: give each
// artifact its own, such as "<sid>/<call id>/output".
func (b *Bus) PutArtifact(ctx context.Context, name string, r io.Reader) (event.ArtifactRef, error) {
	if name == "" {
		return event.ArtifactRef{}, fmt.Errorf("put artifact: empty name")
	}
	h := sha256.New()
	info, err := b.artifacts.Put(ctx, jetstream.ObjectMeta{Name: name}, io.TeeReader(r, h))
	if err != nil {
		return event.ArtifactRef{}, fmt.Errorf("put artifact %q: %w", name, err)
	}
	return event.ArtifactRef{
		Bucket: wire.ArtifactBucket, Object: name,
		Size: int64(info.Size), SHA256: hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// PutArtifactBytes is PutArtifact of a byte slice.
func (b *Bus) PutArtifactBytes(ctx context.Context, name string, data []byte) (event.ArtifactRef, error) {
	return b.PutArtifact(ctx, name, bytes.NewReader(data))
}

// OpenArtifact opens the blob ref points at. The reader fails with
// ErrArtifactCorrupt at its end if the content does not match ref's size and
// digest. The caller closes it.
func (b *Bus) OpenArtifact(ctx context.Context, ref event.ArtifactRef) (io.ReadCloser, error) {
	store := b.artifacts
	if ref.Bucket != "" && ref.Bucket != wire.ArtifactBucket {
		var err error
		if store, err = b.js.ObjectStore(ctx, ref.Bucket); err != nil {
			return nil, fmt.Errorf("artifact %s/%s: %w", ref.Bucket, ref.Object, err)
		}
	}
	r, err := store.Get(ctx, ref.Object)
	if err != nil {
		return nil, fmt.Errorf("artifact %s/%s: %w", ref.Bucket, ref.Object, err)
	}
	return &checkedReader{r: r, ref: ref, h: sha256.New()}, nil
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

type checkedReader struct {
	r   io.ReadCloser
	ref event.ArtifactRef
	h   interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	_, _ = c.h.Write(p[:n])
	if err == io.EOF {
		if c.n != c.ref.Size {
			return n, fmt.Errorf("artifact %s/%s is %d bytes, its reference says %d: %w", c.ref.Bucket, c.ref.Object, c.n, c.ref.Size, ErrArtifactCorrupt)
		}
		if sum := hex.EncodeToString(c.h.Sum(nil)); c.ref.SHA256 != "" && sum != c.ref.SHA256 {
			return n, fmt.Errorf("artifact %s/%s has SHA-256 %s, its reference says %s: %w", c.ref.Bucket, c.ref.Object, sum, c.ref.SHA256, ErrArtifactCorrupt)
		}
	}
	return n, err
}

func (c *checkedReader) Close() error { return c.r.Close() }

// CheckpointKey is the key in tah_checkpoints of checkpoint id of session sid:
// "<sid>.<id token>", where the token of an id is the id itself when it is 1
// to 128 letters, digits, '_' or '-', and otherwise "=" followed by the
// unpadded base64url of its bytes (the rule docs/protocol.md gives for every
// id in a subject or key; remote tool results use it too).
func CheckpointKey(sid, id string) string { return sid + "." + Token(id) }

// Token is the subject token and KV key part of an id: the id itself when it
// is 1 to 128 letters, digits, '_' or '-', otherwise "=" followed by the
// unpadded base64url of its UTF-8 bytes.
func Token(id string) string {
	if len(id) >= 1 && len(id) <= 128 && event.ValidSessionID(id) == nil {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}
