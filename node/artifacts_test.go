package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// A session's artifacts are listed and fetched through the API, with a
// reader's credential: a large tool output (kept whole in tah_artifacts,
// over a reply's piece) comes back whole and checked.
func TestArtifactsListAndFetch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := bus.Default()
	// A max payload of 1 MiB: pieces of some 780 KB, so that the artifact
	// takes two.
	cfg.DataDir, cfg.Port, cfg.Partitions, cfg.MaxPayload = t.TempDir(), -1, 2, 1<<20
	whole := strings.Repeat("0123456789abcdef", 80_000) // 1.28 MB
	big := tools.Func(tools.Spec{Name: "big"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(whole), nil
	})
	n, err := Start(ctx, Options{Bus: cfg, Provider: mock.Scripted(mock.CallTool("big", `{}`), mock.Say("done")),
		Tools: tools.MustRegistry(big), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	h := &hostile{t: t, n: n, dir: cfg.DataDir, ctx: ctx}
	writer := h.client(h.issue(wire.RoleClient, "alice"))
	s, err := writer.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h.run(writer, s.Session)

	c := h.client(h.issue(wire.RoleObserver, "olive"))
	list, err := c.Artifacts(ctx, s.Session)
	if err != nil || len(list.Artifacts) != 1 {
		t.Fatalf("artifacts: %+v %v", list, err)
	}
	art := list.Artifacts[0]
	if art.Name != "output.txt" || art.Ref.Size != int64(len(whole)) || art.StepID == "" || art.CallID == "" {
		t.Fatalf("artifact %+v", art)
	}
	if max := wire.ArtifactPieceMax(1 << 20); max >= len(whole) || max < wire.ArtifactChunkMax {
		t.Fatalf("pieces of %d bytes", max)
	}
	for _, key := range []string{art.ID, art.Name} {
		var got bytes.Buffer
		if _, err := c.FetchArtifact(ctx, s.Session, key, &got); err != nil || got.String() != whole {
			t.Fatalf("fetch %s: %d bytes, %v", key, got.Len(), err)
		}
	}
	piece, err := c.ArtifactPiece(ctx, wire.ArtifactRequest{Session: s.Session, Artifact: art.ID, Offset: 10, Limit: 6})
	if err != nil || string(piece.Data) != "abcdef" || piece.EOF {
		t.Fatalf("piece: %q eof %v, %v", piece.Data, piece.EOF, err)
	}
	var ae *client.APIError
	if _, err := c.FetchArtifact(ctx, s.Session, "nope.txt", &bytes.Buffer{}); !errors.As(err, &ae) || ae.Code != wire.APIErrNotFound ||
		!strings.Contains(ae.Message, "tahctl artifacts") {
		t.Fatalf("an unknown artifact: %v", err)
	}
	if _, err := c.ArtifactPiece(ctx, wire.ArtifactRequest{Session: s.Session, Artifact: art.ID, Offset: art.Ref.Size + 1}); !errors.As(err, &ae) || ae.Code != wire.APIErrBadRequest {
		t.Fatalf("an offset past the end: %v", err)
	}
	// A blob that differs from its record is refused, not served.
	if err := n.bus.Artifacts().Delete(ctx, art.Ref.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := n.bus.PutArtifactBytes(ctx, art.Ref.Object, []byte("something else")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchArtifact(ctx, s.Session, art.ID, &bytes.Buffer{}); err == nil {
		t.Fatal("a replaced blob was served as the artifact")
	}
}
