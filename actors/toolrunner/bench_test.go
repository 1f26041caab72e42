package toolrunner_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// BenchmarkExecute is what a session pays the runner for a step of one call
// to a tool that does nothing (make bench's row 2): the batch's way to the
// runner actor and back, its contexts and goroutines, the input's check.
//
//	go test -run NONE -bench Execute -benchmem ./actors/toolrunner
func BenchmarkExecute(b *testing.B) {
	noop := tools.Func(tools.Spec{Name: "noop", Idempotent: true}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text("ok"), nil
	})
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	r, err := toolrunner.Spawn(sys.Root, toolrunner.Config{Executor: executor(noop), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Stop(context.Background()) }()
	ctx := context.Background()
	call := []llm.ToolCall{{ID: "c1", Name: "noop", Arguments: json.RawMessage(`{}`)}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Execute(ctx, toolrunner.ExecuteBatch{Session: "s_bench", Calls: call})
		if err != nil {
			b.Fatal(err)
		}
		if res.Results[0].Result.IsError {
			b.Fatal(res.Results[0].Result.Output)
		}
	}
}
