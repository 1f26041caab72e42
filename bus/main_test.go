package bus

import (
	"os"
	"testing"

	"github.com/tah-dev/tah/bus/bustest"
)

// TestMain runs four tests at a time: most wait on their servers (a stream
// moving, a leader elected, a redelivery). Measured on two cores beside
// package node's tests, the package took 209 s one test at a time and 114 s
// four at a time, for about the same CPU (94 s and 83 s). The tests that set
// the group commit's or the placement's package variables (minGroup,
// maxAlone, placeRecheck), and those that need a leader to outlive its
// followers for a while (inProcessCluster), do not call t.Parallel: they run
// alone, before the others.
func TestMain(m *testing.M) {
	bustest.WaitingTestsAtOnce(4)
	os.Exit(m.Run())
}
