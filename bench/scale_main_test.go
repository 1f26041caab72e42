package bench

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"testing"

	"github.com/tah-dev/tah/cmd/node/nodecmd"
)

// TestMain runs the tests, or, when row 9's test starts this binary as one
// of its nodes (-tah-node -- ARGS, as cmd/tah-bench is started), tah-node.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-"+NodeFlag {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		var args []string
		if i := slices.Index(os.Args, "--"); i >= 0 {
			args = os.Args[i+1:]
		}
		err := nodecmd.Run(ctx, args, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			nodecmd.Report(os.Stderr, err)
			os.Exit(nodecmd.ExitCode(err))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
