package tah_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestApproveThroughTheGoAPI: with the Approval plugin, a call of the
// named tool waits; Session.Approve runs it and the turn completes; a
// second Approve is told the call was decided.
func TestApproveThroughTheGoAPI(t *testing.T) {
	dir := t.TempDir()
	nats := bus.Default()
	nats.DataDir, nats.Port, nats.Partitions = dir, -1, 2
	tool := &counter{name: "count"}
	rt := tah.New().WithLogger(slog.New(slog.DiscardHandler)).
		Use(tah.NATS(nats)).
		Use(tah.Storage(tah.StorageOptions{Path: filepath.Join(dir, "data.db")})).
		Use(tah.LLM(tah.LLMOptions{Instance: mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted"))})).
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
	r, err := s.Run(ctx, "count once")
	if err != nil || r.State != tah.StateWaitingTool || len(r.AwaitingApproval) != 1 || tool.runs.Load() != 0 {
		t.Fatalf("%+v %v (runs %d)", r, err, tool.runs.Load())
	}
	call := r.AwaitingApproval[0].ID
	r, err = s.Approve(ctx, tah.Decision{Calls: []string{call}, By: "go-test"})
	if err != nil || r.State != tah.StateCompleted || r.Content != "counted" || tool.runs.Load() != 1 {
		t.Fatalf("%+v %v (runs %d)", r, err, tool.runs.Load())
	}
	_, err = s.Approve(ctx, tah.Decision{Calls: []string{call}})
	var ce *client.CommandError
	if !errors.As(err, &ce) || ce.Code != wire.FailureAlreadyDecided {
		t.Fatalf("a second approval: %v", err)
	}
}
