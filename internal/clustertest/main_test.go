package clustertest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// nodeBin is the tah-node binary TestMain built.
var nodeBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself
	}
	dir, err := os.MkdirTemp("", "clustertest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustertest:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "clustertest:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// build compiles cmd/node into dir/tah-node, with -race when this test binary
// has it.
func build(dir string) error {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return fmt.Errorf("no go command to build tah-node: %w", err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	nodeBin = filepath.Join(dir, "tah-node")
	args := []string{"build", "-o", nodeBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/node")
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	fmt.Fprintf(os.Stderr, "clustertest: built tah-node (race=%v) in %v\n", raceEnabled, time.Since(start).Round(time.Millisecond))
	return nil
}
