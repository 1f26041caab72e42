package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Clusters forming at once, machine-wide. A cluster forms in a burst of CPU
// (meta leader election, every stream and consumer created and replicated,
// each node's setup) that is mostly the servers' own; and make test runs
// several packages at once, each several cluster tests at once
// (bustest.WaitingTestsAtOnce). Eight clusters forming together on two cores
// under -race made every JetStream request take a few hundred milliseconds,
// and setups that had to fit five seconds never did (CI: "stream TAH_IN:
// context deadline exceeded" for minutes in two node tests of one run; the
// product's side of that is bus.setupWithRetry's growing attempts).
// Formations take turns instead, as many at once as the machine has cores;
// what the tests do once their cluster is ready still runs side by side.

// formingDir holds one lock file per formation slot; the locks are what
// processes running side by side (go test's packages) share.
var formingDir = filepath.Join(os.TempDir(), "tahtest-forming")

// formingSlot waits for one of the formation slots in dir (one per core of
// the machine) and returns its release. A slot not had within (or no lock to
// be had at all) lets the formation go on without one, logged: the limit
// eases load, it must never be why a test hangs.
func formingSlot(tb TB, dir string, within time.Duration) (release func()) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Logf("natstest: no formation slot (%v): forming without one", err)
		return func() {}
	}
	slots := max(1, runtime.NumCPU())
	waited := time.Now()
	err := Poll(within, 25*time.Millisecond, func() error {
		for i := range slots {
			f, ok := tryLock(filepath.Join(dir, fmt.Sprintf("slot-%d", i)))
			if ok {
				release = func() { f.Close() } // closing the file drops its lock
				return nil
			}
		}
		return fmt.Errorf("all %d formation slots taken", slots)
	})
	if err != nil {
		tb.Logf("natstest: %v after %v: forming without one", err, time.Since(waited).Round(time.Millisecond))
		return func() {}
	}
	if d := time.Since(waited); d > time.Second {
		tb.Logf("natstest: waited %v for a formation slot", d.Round(time.Millisecond))
	}
	return release
}
