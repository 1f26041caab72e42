package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tah-dev/tah/event"
)

var errCrash = errors.New("simulated crash")

// crashStream is what the crash tests apply: two sessions interleaved, in
// batches of crashBatch.
func crashStream(t testing.TB) []event.Event {
	return merge(richLog(t, "s_a"), richLog(t, "s_b"), recordedLogs(t)["cancel_repair_compact"])
}

const crashBatch = 9

// reference is the database of an uncrashed run.
func reference(t *testing.T, evs []event.Event) (string, *Store) {
	t.Helper()
	s := openTest(t, Options{})
	apply(t, s, evs, crashBatch)
	return dump(t, s.Path()), s
}

// TestFailureMidBatchRollsBack fails a batch after some of its events, inside
// the transaction, then delivers everything again (as the projector would,
// from its position), on the same store and after a reopen: the result is the
// uncrashed one.
func TestFailureMidBatchRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	evs := crashStream(t)
	want, _ := reference(t, evs)
	for _, reopen := range []bool{false, true} {
		for _, at := range []int{0, crashBatch - 1} {
			for _, batchNo := range []int{0, 3, len(evs) / crashBatch} {
				t.Run(fmt.Sprintf("reopen=%v/batch%d/event%d", reopen, batchNo, at), func(t *testing.T) {
					t.Parallel()
					s := openTest(t, Options{})
					for i := 0; i < len(evs); i += crashBatch {
						batch := evs[i:min(i+crashBatch, len(evs))]
						if i/crashBatch == batchNo {
							s.afterEvent = func(j int) error {
								if j == min(at, len(batch)-1) {
									return errCrash
								}
								return nil
							}
							if _, err := s.Apply(ctx, batch); !errors.Is(err, errCrash) {
								t.Fatalf("apply with a crash: %v", err)
							}
							s.afterEvent = nil
							break
						}
						if _, err := s.Apply(ctx, batch); err != nil {
							t.Fatal(err)
						}
					}
					pos, err := s.Positions(ctx, DefaultConsumer)
					if err != nil || pos[0] != uint64(min(batchNo*crashBatch, len(evs))) {
						t.Fatalf("position after the failed batch: %v %v", pos, err)
					}
					if reopen {
						s.Close()
						s = openAt(t, s.Path(), Options{})
					}
					// Redeliver from the start: what was committed is skipped.
					apply(t, s, evs, crashBatch)
					if got := dump(t, s.Path()); got != want {
						t.Fatalf("after the crash:\n%s\nwant:\n%s", got, want)
					}
					checkEquivalent(t, s, evs)
				})
			}
		}
	}
}

// TestCancelMidBatch: a context done in the middle of a batch (a node
// shutting down) stops it before the next event, rolls it back, and a
// redelivery gives the result of a store never cancelled. The batch's
// statements do not watch the context themselves (Apply checks it between
// events), so this is what keeps a cancel from committing.
func TestCancelMidBatch(t *testing.T) {
	t.Parallel()
	evs := crashStream(t)
	want, _ := reference(t, evs)
	s := openTest(t, Options{})
	apply(t, s, evs[:crashBatch], crashBatch)
	ctx, cancel := context.WithCancel(context.Background())
	s.afterEvent = func(j int) error {
		if j == 2 {
			cancel()
		}
		return nil
	}
	if _, err := s.Apply(ctx, evs[crashBatch:2*crashBatch]); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply cancelled mid-batch: %v", err)
	}
	s.afterEvent = nil
	if _, err := s.Apply(ctx, evs[crashBatch:]); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with a done context: %v", err)
	}
	pos, err := s.Positions(context.Background(), DefaultConsumer)
	if err != nil || pos[0] != uint64(crashBatch) {
		t.Fatalf("position after the cancelled batch: %v %v", pos, err)
	}
	apply(t, s, evs, crashBatch)
	if got := dump(t, s.Path()); got != want {
		t.Fatalf("after the cancel:\n%s\nwant:\n%s", got, want)
	}
	checkEquivalent(t, s, evs)
}

// TestCrashedProcess kills a process in the middle of a batch's transaction
// (os.Exit: no rollback, no close), then reopens its database and delivers the
// stream again.
func TestCrashedProcess(t *testing.T) {
	if os.Getenv("TAH_STORE_CRASH_DB") != "" {
		crashHelper()
		return
	}
	ctx := context.Background()
	evs := crashStream(t)
	want, _ := reference(t, evs)
	for _, crashAt := range []int{5, 40} {
		path := filepath.Join(t.TempDir(), "data.db")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashedProcess$")
		cmd.Env = append(os.Environ(), "TAH_STORE_CRASH_DB="+path, "TAH_STORE_CRASH_AT="+strconv.Itoa(crashAt))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Fatalf("helper did not crash as planned: %v\n%s", err, out)
		}
		s := openAt(t, path, Options{})
		positions, err := s.Positions(ctx, DefaultConsumer)
		if err != nil {
			t.Fatal(err)
		}
		if pos, want := positions[0], uint64(crashAt/crashBatch*crashBatch); pos != want {
			t.Fatalf("position after the crash %d, want %d (the last committed batch)", pos, want)
		}
		apply(t, s, evs[positions[0]:], crashBatch)
		if got := dump(t, path); got != want {
			t.Fatalf("after the crash:\n%s\nwant:\n%s", got, want)
		}
		checkEquivalent(t, s, evs)
	}
}

// crashHelper runs in the child process of TestCrashedProcess.
func crashHelper() {
	path := os.Getenv("TAH_STORE_CRASH_DB")
	crashAt, _ := strconv.Atoi(os.Getenv("TAH_STORE_CRASH_AT"))
	s, err := Open(context.Background(), path)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	evs := crashStream(exitTB{})
	for i := 0; i < len(evs); i += crashBatch {
		base := i
		s.afterEvent = func(j int) error {
			if base+j == crashAt {
				os.Exit(3) // mid-transaction
			}
			return nil
		}
		if _, err := s.Apply(context.Background(), evs[i:min(i+crashBatch, len(evs))]); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// exitTB is the testing.TB of the helper process, which has no test to fail.
type exitTB struct{ testing.TB }

func (exitTB) Helper()                      {}
func (exitTB) Fatal(args ...any)            { fmt.Println(args...); os.Exit(1) }
func (exitTB) Fatalf(f string, args ...any) { fmt.Printf(f+"\n", args...); os.Exit(1) }
