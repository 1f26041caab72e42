package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The programs the tests run, built once for the test binary (tools.build)
// into a temporary directory: what make image puts in the image (static,
// CGO_ENABLED=0), the image builder, and nats-server from the module TAH
// depends on (the version the compose file's image must name).
var tools struct {
	once sync.Once
	dir  string
	err  error
}

// builtTools builds every program binary gives, once: a test calls it
// before it starts the clock of its hang bound.
func builtTools(t *testing.T) { binary(t, "tah-node") }

// binary is the path of the built program name, building them all at the
// first call.
func binary(t *testing.T, name string) string {
	t.Helper()
	tools.once.Do(func() {
		start := time.Now()
		tools.dir, tools.err = os.MkdirTemp("", "tah-deploy-bin-")
		if tools.err == nil {
			tools.err = buildTools(tools.dir)
		}
		if tools.err == nil {
			t.Logf("built tah-node, tahctl, tah-trust, tah-image and nats-server in %v", time.Since(start).Round(time.Millisecond))
		}
	})
	if tools.err != nil {
		t.Fatal(tools.err)
	}
	return filepath.Join(tools.dir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tools.dir != "" {
		os.RemoveAll(tools.dir)
	}
	os.Exit(code)
}

// goCmd is the go command of the toolchain that runs the tests.
func goCmd() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// buildTools builds the programs into dir as make image does: static,
// trimmed paths, the VCS stamp that tah-node --version prints.
func buildTools(dir string) error {
	builds := []struct {
		moduleDir string
		out       string
		pkg       string
	}{
		{"..", "tah-node", "./cmd/node"},
		{"..", "tahctl", "./cmd/tahctl"},
		{"..", "nats-server", "github.com/nats-io/nats-server/v2"},
		{".", "tah-trust", "./cmd/tah-trust"},
		{".", "tah-image", "./cmd/tah-image"},
	}
	for _, b := range builds {
		args := []string{"build", "-trimpath", "-buildvcs=auto", "-o", filepath.Join(dir, b.out)}
		if b.moduleDir == "." {
			// This module builds TAH's packages from the tree (replace ../):
			// its go.sum follows a dependency the main module gained.
			args = append(args, "-mod=mod")
		}
		cmd := exec.Command(goCmd(), append(args, b.pkg)...)
		cmd.Dir = b.moduleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// run runs a program to its end and returns its stdout; a failure fails the
// test with what it wrote.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(ctx, dir, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// cleanEnv is this process's environment without TAH_ and NATS variables,
// which would change what the programs do.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TAH_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}
