package tah_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
)

// TestSteerAndInterruptThroughTheGoAPI: WithInterrupt on a session whose
// turn waits for approval cancels that turn (its call never runs) and runs
// its own; WithSteer on an idle session runs as a turn of its own.
func TestSteerAndInterruptThroughTheGoAPI(t *testing.T) {
	dir := t.TempDir()
	nats := bus.Default()
	nats.DataDir, nats.Port, nats.Partitions = dir, -1, 2
	tool := &counter{name: "count"}
	rt := tah.New().WithLogger(slog.New(slog.DiscardHandler)).
		Use(tah.NATS(nats)).
		Use(tah.Storage(tah.StorageOptions{Path: filepath.Join(dir, "data.db")})).
		Use(tah.LLM(tah.LLMOptions{Instance: mock.Scripted(mock.CallTool("count", `{}`), mock.Say("not counted"), mock.Say("steered alone"))})).
		Use(tah.Tools(tool)).
		Use(tah.Approval(tah.ApprovalPolicy{Rules: map[string]string{"co*": "always"}}))
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	ctx := ctxT(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "count once"); err != nil || r.State != tah.StateWaitingTool {
		t.Fatalf("%+v %v", r, err)
	}
	r, err := s.Run(ctx, "never mind", tah.WithInterrupt())
	if err != nil || r.State != tah.StateCompleted || r.Turn != 2 || r.Content != "not counted" || tool.runs.Load() != 0 {
		t.Fatalf("the interrupt: %+v %v (runs %d)", r, err, tool.runs.Load())
	}
	st, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := false
	for _, m := range st.Messages {
		cancelled = cancelled || m.Role == llm.RoleTool && strings.Contains(m.Content, "cancelled while it waited for approval")
	}
	if !cancelled {
		t.Fatalf("the waiting call was not paired with a cancelled result: %+v", st.Messages)
	}
	if r, err := s.Run(ctx, "alone", tah.WithSteer()); err != nil || r.Turn != 3 || r.Content != "steered alone" {
		t.Fatalf("a steer of an idle session: %+v %v", r, err)
	}
}
