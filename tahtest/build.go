package tahtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/tahtest/natstest"
)

// ErrNoMain: a Process member running the built tah-node in a test binary
// whose TestMain does not call Main, which removes the binary at the end.
var ErrNoMain = errors.New("a Process member runs the tah-node built for the tests: the package's TestMain must call tahtest.Main, which removes it at the end: func TestMain(m *testing.M) { os.Exit(tahtest.Main(m)) }")

// built is the tah-node built for this test binary, once.
var built struct {
	main atomic.Bool // Main runs the tests
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Main runs the tests of a package whose clusters have Process members, and
// removes the tah-node built for them:
//
//	func TestMain(m *testing.M) { os.Exit(tahtest.Main(m)) }
//
// The binary is built at the first Process member's start (with -race when
// the test binary has it, so that a data race in a node fails the test too),
// once for the whole test binary.
func Main(m interface{ Run() int }) int {
	built.main.Store(true)
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}

// nodeBinary returns the built tah-node, building it at the first call.
func nodeBinary(tb natstest.TB) string {
	tb.Helper()
	if !built.main.Load() {
		tb.Fatalf("tahtest: %v", ErrNoMain)
	}
	built.once.Do(func() {
		start := time.Now()
		built.dir, built.bin, built.err = build()
		if built.err == nil {
			tb.Logf("tahtest: built tah-node (race=%v) in %v", raceEnabled, time.Since(start).Round(time.Millisecond))
		}
	})
	if built.err != nil {
		tb.Fatalf("%v", built.err)
	}
	return built.bin
}

// build compiles cmd/node of this module into a new temporary directory.
func build() (dir, bin string, err error) {
	// go test sets GOROOT for the test binary: the toolchain that runs the
	// tests builds the node too.
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return "", "", fmt.Errorf("tahtest: no go command to build tah-node: %w", err)
		}
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", "", fmt.Errorf("tahtest: building tah-node needs the module's source: run the tests inside the module (go env GOMOD: %q, %v)", gomod, err)
	}
	if dir, err = os.MkdirTemp("", "tahtest-bin-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "tah-node")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/node")
	cmd := exec.Command(goBin, args...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("tahtest: go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir, bin, nil
}
