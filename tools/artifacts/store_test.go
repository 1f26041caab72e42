package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools/artifacts"
)

// jetStream is JetStream on a server of the test's own, and a context for
// the test's calls.
func jetStream(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	nc := bustest.Connect(t, bustest.Server(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, js
}

func TestPutOpen(t *testing.T) {
	ctx, js := jetStream(t)
	store, err := artifacts.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	// A second Open binds to the same bucket.
	if _, err := artifacts.Open(ctx, js); err != nil {
		t.Fatalf("second open: %v", err)
	}
	content := strings.Repeat("hello artifact\n", 100_000) // 1.5 MB: several chunks
	ref, err := store.Put(ctx, "calls/s_1/call_1/output.txt", strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if ref.Bucket != artifacts.Bucket || ref.Object != "calls/s_1/call_1/output.txt" ||
		ref.Size != int64(len(content)) || ref.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("ref = %+v", ref)
	}
	rc, err := store.Open(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Fatalf("read back %d bytes, want %d", len(got), len(content))
	}
}

// TestOpenVerifies: a read through the store checks the blob against its
// reference at its end: a blob whose content changed under the reference,
// or whose size differs, fails with ErrCorrupt (the store's readers, the
// node's API among them, never hand out a blob that is not the one an event
// names); a reference without a digest is checked for its size only.
func TestOpenVerifies(t *testing.T) {
	ctx, js := jetStream(t)
	store, err := artifacts.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := store.Put(ctx, "calls/s_1/call_1/output.txt", strings.NewReader("the real output"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(ref event.ArtifactRef) (string, error) {
		rc, err := store.Open(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read(ref); err != nil || got != "the real output" {
		t.Fatalf("read %q, %v", got, err)
	}
	// Another content of the same size under the same name.
	if _, err := store.Put(ctx, ref.Object, strings.NewReader("the fake output")); err != nil {
		t.Fatal(err)
	}
	if _, err := read(ref); !errors.Is(err, artifacts.ErrCorrupt) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("changed content: %v, want ErrCorrupt naming the digest", err)
	}
	noDigest := ref
	noDigest.SHA256 = ""
	if got, err := read(noDigest); err != nil || got != "the fake output" {
		t.Fatalf("no digest: %q, %v", got, err)
	}
	noDigest.Size++
	if _, err := read(noDigest); !errors.Is(err, artifacts.ErrCorrupt) {
		t.Fatalf("other size: %v, want ErrCorrupt", err)
	}
	if _, err := store.Open(ctx, event.ArtifactRef{Bucket: artifacts.Bucket, Object: "none"}); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := store.Put(ctx, "", strings.NewReader("x")); err == nil {
		t.Fatal("an empty name was taken")
	}
}

// TestEnsure: the one set-up of the bucket. CheckOnly creates nothing and
// reports a missing bucket as jetstream does; a bucket is created with the
// replicas asked for, and Open (Replicas 0) leaves an existing bucket's
// settings as they are; CheckOnly reports other replicas as ErrSettings.
func TestEnsure(t *testing.T) {
	ctx, js := jetStream(t)
	if _, err := artifacts.Ensure(ctx, js, artifacts.Setup{Replicas: 1, CheckOnly: true}); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("check of a missing bucket: %v", err)
	}
	if _, err := js.ObjectStore(ctx, artifacts.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("CheckOnly created the bucket: %v", err)
	}
	obs, err := artifacts.Ensure(ctx, js, artifacts.Setup{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(ctx)
	if err != nil || st.Replicas() != 1 || st.Bucket() != artifacts.Bucket {
		t.Fatalf("status %v: %v", st, err)
	}
	if _, err := artifacts.Ensure(ctx, js, artifacts.Setup{Replicas: 1, CheckOnly: true}); err != nil {
		t.Fatalf("check of the bucket as asked: %v", err)
	}
	// A single server cannot hold three replicas: the check says so
	// without asking the server to change anything, and Open takes the
	// bucket as it is.
	if _, err := artifacts.Ensure(ctx, js, artifacts.Setup{Replicas: 3, CheckOnly: true}); !errors.Is(err, artifacts.ErrSettings) {
		t.Fatalf("check of other replicas: %v", err)
	}
	if _, err := artifacts.Open(ctx, js); err != nil {
		t.Fatalf("open: %v", err)
	}
}
