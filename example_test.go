package tah_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools/builtin"
)

// The specification's usage, in Go: a runtime with SQLite storage, the mock
// provider, the list_files and read_file tools and the default agent loop; one
// session asked to analyse a project's directory structure.
func Example() {
	ctx := context.Background()
	project := exampleProject() // the directory the tools may read ("." in the specification)
	defer os.RemoveAll(project)
	data, _ := os.MkdirTemp("", "tah-example-")
	defer os.RemoveAll(data)

	nats := bus.Default()
	nats.DataDir, nats.Port = data, -1 // a free port, so that the example runs beside a node
	mock := llm.DefaultConfig()
	mock.MockPace = 0 // the demo streams token by token; no need to wait here

	runtime := tah.New()
	runtime.Use(tah.NATS(nats))
	runtime.Use(tah.Storage(tah.StorageOptions{Driver: "sqlite", Path: filepath.Join(data, "data.db")}))
	runtime.Use(tah.LLM(tah.LLMOptions{Provider: "mock", Config: &mock}))
	runtime.Use(tah.Tools(builtin.ListFiles(project), builtin.ReadFile(project)))
	runtime.Use(tah.Agent(tah.AgentOptions{}))
	if err := runtime.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer runtime.Close(ctx)

	sessions := tah.Get(runtime, tah.SessionKey)
	session, err := sessions.Create(ctx)
	if err != nil {
		log.Fatal(err)
	}
	result, err := session.Run(ctx, "分析这个项目的目录结构")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(result.State, result.Steps)
	// Output:
	// completed 3
}

// exampleProject lays out a small project to analyse.
func exampleProject() string {
	dir, _ := os.MkdirTemp("", "tah-project-")
	os.MkdirAll(filepath.Join(dir, "cmd", "app"), 0o755)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Demo\n\nA small demo project.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module demo\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cmd", "app", "main.go"), []byte("package main\n"), 0o644)
	return dir
}
