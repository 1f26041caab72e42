package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/tools/artifacts"
)

func TestPutOpen(t *testing.T) {
	nc := bustest.Connect(t, bustest.Server(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
