package natstest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Fatalf ends f alone, as FailNow ends a test; the cleanups run after it,
// the last first, and Run returns every failure.
func TestRunFatalEndsOnlyF(t *testing.T) {
	var order []string
	var log strings.Builder
	after := false
	err := Run(&log, "row", func(tb TB) {
		tb.Cleanup(func() { order = append(order, "first") })
		tb.Cleanup(func() {
			order = append(order, "second")
			if !tb.Failed() {
				t.Error("a cleanup does not see the failure")
			}
		})
		tb.Logf("hello %s", tb.Name())
		tb.Errorf("one %d", 1)
		tb.Fatalf("two")
		after = true
	})
	if after {
		t.Fatal("f went on after Fatalf")
	}
	if err == nil || err.Error() != "one 1\ntwo" {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Fatalf("cleanups ran in the order %v", order)
	}
	if log.String() != "hello row\n" {
		t.Fatalf("log %q", log.String())
	}
	if err := Run(nil, "ok", func(tb TB) { tb.Logf("quiet") }); err != nil {
		t.Fatalf("a run without failures: %v", err)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if err := Poll(time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	stop := errors.New("never")
	if err := Poll(time.Minute, time.Millisecond, func() error { return Permanent(stop) }); err != stop {
		t.Fatalf("a permanent error: %v", err)
	}
	err := Poll(10*time.Millisecond, time.Millisecond, Until(func() bool { return false }))
	if !errors.Is(err, errNotYet) || !strings.Contains(err.Error(), "after 10ms") {
		t.Fatalf("a timeout: %v", err)
	}
}
