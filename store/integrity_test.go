package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/testfs"
)

// manySessions is a log of 30 sessions interleaved: a database of a few
// hundred pages, whose middle holds rows of most of them.
func manySessions(t testing.TB) []event.Event {
	var logs [][]event.Event
	for i := range 30 {
		logs = append(logs, richLog(t, fmt.Sprintf("s_many_%02d", i)))
	}
	return merge(logs...)
}

// damage overwrites the middle third of the database file at path with
// garbage, in whole pages, keeping its header (page 1): SQLite still opens
// it, and the pages of most rows are gone. The file must be closed (its
// write-ahead log checkpointed into it).
func damage(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := fi.Size() / page
	if pages < 6 {
		t.Fatalf("%s has %d pages: too small to damage in the middle", path, pages)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	garbage := []byte(strings.Repeat("garbage!", page/8))
	for p := pages / 3; p < 2*pages/3; p++ {
		if _, err := f.WriteAt(garbage, p*page); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A file damaged in its middle opens no more: Open runs SQLite's integrity
// check and says ErrDamaged, naming the file and what to do; set aside
// (MoveAside), the next Open starts empty and the same log folds into the same
// read model.
func TestOpenFindsADamagedFile(t *testing.T) {
	ctx := context.Background()
	evs := manySessions(t)
	path := filepath.Join(t.TempDir(), "data.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, evs, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, path)

	_, err = Open(ctx, path)
	if !errors.Is(err, ErrDamaged) || !IsDamaged(err) {
		t.Fatalf("opening a damaged file: %v", err)
	}
	for _, want := range []string{path, "integrity check", "rebuilt from the log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	aside, err := MoveAside(path)
	if err != nil || !strings.HasPrefix(aside, path+".damaged-") {
		t.Fatalf("move aside: %q %v", aside, err)
	}
	if _, err := os.Stat(aside); err != nil {
		t.Fatalf("the damaged file is not kept: %v", err)
	}
	s = openAt(t, path, Options{})
	if pos, err := s.Positions(ctx, DefaultConsumer); err != nil || pos[0] != 0 {
		t.Fatalf("a new read model at %v, %v", pos, err)
	}
	apply(t, s, evs, 50)
	checkEquivalent(t, s, evs)
}

// With DeferCheck, Open leaves the integrity check to its caller (the
// node's projector runs it beside its work): a damaged file opens, says
// Unchecked, and Check finds the damage. A new file is checked at Open (a
// migration is due: it must not build on a damaged file), and so is the
// new file of a Reset; a Check that passes clears Unchecked.
func TestOpenCanLeaveTheCheckToTheCaller(t *testing.T) {
	ctx := context.Background()
	evs := manySessions(t)
	path := filepath.Join(t.TempDir(), "data.db")
	s := openAt(t, path, Options{DeferCheck: true})
	if s.Unchecked() {
		t.Fatal("a new file was not checked at Open")
	}
	apply(t, s, evs, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{DeferCheck: true})
	if !s.Unchecked() {
		t.Fatal("the check was not left to the caller")
	}
	if err := s.Check(ctx); err != nil || s.Unchecked() {
		t.Fatalf("check of a sound file: %v, unchecked %v", err, s.Unchecked())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	damage(t, path)
	s, err := OpenWith(ctx, path, Options{DeferCheck: true})
	if err != nil {
		t.Fatalf("a damaged file whose check is the caller's: %v", err)
	}
	defer s.Close()
	if err := s.Check(ctx); !IsDamaged(err) || !s.Unchecked() {
		t.Fatalf("check of the damaged file: %v, unchecked %v", err, s.Unchecked())
	}
	if _, err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Unchecked() {
		t.Fatal("the new file of a Reset says it is unchecked")
	}
	apply(t, s, evs, 50)
	checkEquivalent(t, s, evs)
}

// A file this process cannot write is refused at Open (ErrReadOnly, with
// the file and what to do), not found out at the first Apply: a projector
// would retry that forever.
func TestOpenRefusesAReadOnlyFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, richLog(t, "s_a"), 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testfs.ReadOnly(t, path)
	s, err = Open(ctx, path)
	if err == nil {
		s.Close()
		t.Fatal("a read-only file opened")
	}
	if !errors.Is(err, ErrReadOnly) || !IsReadOnly(err) || IsDamaged(err) {
		t.Fatalf("opening a read-only file: %v", err)
	}
	for _, want := range []string{path, "cannot be written", "chattr -i"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// Reset sets the file aside and starts over on a new one while reads go on:
// none of them fails (a session not folded again yet is not found), the
// positions are back to 0, and the log folds again into the same read model.
func TestResetStartsOverOnANewFile(t *testing.T) {
	ctx := context.Background()
	evs := manySessions(t)
	s := openTest(t, Options{})
	apply(t, s, evs, 50)
	gen := s.Generation()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	readErrs := make(chan error, 100)
	for range 4 {
		wg.Add(1)
		go func() { // owned here: ends at close(stop)
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.ListSessions(ctx, ListOptions{Limit: 10}); err != nil {
					readErrs <- err
					return
				}
				if _, err := s.Messages(ctx, "s_many_07"); err != nil && !errors.Is(err, ErrNotFound) {
					readErrs <- err
					return
				}
			}
		}()
	}
	aside, err := s.Reset(ctx)
	close(stop)
	wg.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Errorf("a read during the reset: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(aside); err != nil || !strings.HasPrefix(aside, s.Path()+".damaged-") {
		t.Fatalf("set aside as %q: %v", aside, err)
	}
	if s.Generation() != gen+1 {
		t.Fatalf("generation %d after a reset of %d", s.Generation(), gen)
	}
	if pos, err := s.Positions(ctx, DefaultConsumer); err != nil || pos[0] != 0 {
		t.Fatalf("positions after the reset: %v, %v", pos, err)
	}
	if _, err := s.GetSession(ctx, "s_many_07"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a session before it is folded again: %v", err)
	}
	apply(t, s, evs, 50)
	checkEquivalent(t, s, evs)
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
