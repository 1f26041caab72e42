package clustertest

import (
	"os"
	"testing"

	"github.com/tah-dev/tah/tahtest"
)

// TestMain runs the tests with tahtest.Main, which removes the tah-node built
// for them.
func TestMain(m *testing.M) { os.Exit(tahtest.Main(m)) }
