package natstest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Cluster formations take turns, one per core at once, across the test
// processes of the machine; one that finds every slot taken for its whole
// wait forms without one rather than hang.
func TestFormingSlotsTakeTurns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var held []func()
	for range runtime.NumCPU() {
		held = append(held, formingSlot(t, dir, time.Minute))
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != runtime.NumCPU() {
		t.Fatalf("%d slot files (%v), want %d", len(entries), err, runtime.NumCPU())
	}
	for _, e := range entries {
		if f, ok := tryLock(filepath.Join(dir, e.Name())); ok {
			f.Close()
			t.Fatalf("%s not held", e.Name())
		}
	}
	formingSlot(t, dir, 50*time.Millisecond)() // every slot taken: it goes on without one

	got := make(chan func())
	go func() { got <- formingSlot(t, dir, time.Minute) }()
	held[0]()
	select {
	case release := <-got:
		if f, ok := tryLock(filepath.Join(dir, "slot-0")); ok {
			f.Close()
			t.Fatal("slot-0 freed but not taken by the formation that waited")
		}
		release()
	case <-time.After(time.Minute):
		t.Fatal("a freed slot was not taken")
	}
	for _, r := range held[1:] {
		r()
	}
}
