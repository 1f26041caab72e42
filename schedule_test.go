package tah_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
)

// TestSchedulesThroughTheGoAPI: an At schedule wakes the session once (a
// turn of its own, its text the user message) and is gone; an Every one
// fires again until Unschedule.
func TestSchedulesThroughTheGoAPI(t *testing.T) {
	dir := t.TempDir()
	nats := bus.Default()
	nats.DataDir, nats.Port, nats.Partitions = dir, -1, 2
	rt := tah.New().WithLogger(slog.New(slog.DiscardHandler)).
		Use(tah.NATS(nats)).
		Use(tah.Storage(tah.StorageOptions{Path: filepath.Join(dir, "data.db")})).
		Use(tah.LLM(tah.LLMOptions{Instance: mock.Scripted(mock.Say("woke up").OnPrompt("wake"), mock.Say("tock").OnPrompt("tick").Always())}))
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	ctx := ctxT(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	finished := func(want string) {
		t.Helper()
		for {
			select {
			case ev := <-w.Events():
				if ev.Type != event.AgentFinished {
					continue
				}
				if d, _ := event.DecodeAs[event.AgentFinishedData](ev); d.Content != want {
					t.Fatalf("a turn answered %q, want %q", d.Content, want)
				}
				return
			case <-ctx.Done():
				t.Fatalf("no turn answered %q", want)
			}
		}
	}
	if _, err := s.Schedule(ctx, tah.Schedule{Name: "wake", At: time.Now().Add(time.Second), Text: "wake up"}); err != nil {
		t.Fatal(err)
	}
	finished("woke up")
	if _, err := s.Schedule(ctx, tah.Schedule{Name: "tick", Every: "1s", Text: "tick"}); err != nil {
		t.Fatal(err)
	}
	finished("tock")
	finished("tock")
	list, err := s.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "tick" {
		t.Fatalf("schedules %+v %v (the fired At one is gone)", list, err)
	}
	if removed, err := s.Unschedule(ctx, "tick"); err != nil || !removed {
		t.Fatalf("unschedule: %v %v", removed, err)
	}
	if _, err := s.Schedule(ctx, tah.Schedule{Every: "1s", Cron: "@daily", Text: "x"}); err == nil {
		t.Fatal("a schedule with every and cron was taken")
	}
}
