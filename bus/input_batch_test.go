package bus

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// heldInputs makes TAH_IN's committer of b behave as if maxAlone inputs were
// in flight, so that the inputs stored meanwhile queue; the returned release
// ends that, as the last of them would, and the queue is sent.
func heldInputs(t *testing.T, b *Bus) (release func()) {
	t.Helper()
	c := b.inputCommit
	if c == nil {
		t.Fatal("TAH_IN has no committer: its stream does not allow atomic publish")
	}
	old := maxAlone
	maxAlone = 1
	t.Cleanup(func() { maxAlone = old })
	c.mu.Lock()
	c.alone = 1
	c.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(c.leave) }
	t.Cleanup(release)
	return release
}

// inputsQueued waits until n inputs wait in TAH_IN's committer.
func inputsQueued(t *testing.T, b *Bus, n int) {
	t.Helper()
	c := b.inputCommit
	bustest.Eventually(t, 30*time.Second, fmt.Sprintf("%d inputs queued", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == n
	})
}

// storeAll stores inputs[i] for sessions[i], all at once, and returns their
// errors once every one has returned.
func storeAll(t *testing.T, b *Bus, sids []string, inputs []wire.Input) func() []error {
	errs := make([]error, len(sids))
	var wg sync.WaitGroup
	for i := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.PublishInput(ctxT(t), sids[i], inputs[i])
		}()
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

// storeQueued stores inputs[i] for sessions[i], all queued in TAH_IN's
// committer behind one held in flight, then released together; every one
// must be stored.
func storeQueued(t *testing.T, b *Bus, sids []string, inputs []wire.Input) {
	t.Helper()
	release := heldInputs(t, b)
	wait := storeAll(t, b, sids, inputs)
	inputsQueued(t, b, len(sids))
	release()
	for i, err := range wait() {
		if err != nil {
			t.Fatalf("input of %s: %v", sids[i], err)
		}
	}
}

// delivered consumes TAH_IN until it has n inputs and returns them as
// "<session> <input id>", sorted.
func delivered(t *testing.T, b *Bus, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	c, err := b.ConsumeInputs(ctxT(t), func(ctx context.Context, m *InputMsg) {
		mu.Lock()
		got = append(got, m.Session+" "+m.ID)
		mu.Unlock()
		_ = m.Ack(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	bustest.Eventually(t, 30*time.Second, fmt.Sprintf("%d inputs delivered", n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(got)
	return got
}

// TestInputGroupCommit queues 16 inputs of a node behind one in flight: they
// are stored as one atomic batch, each delivered once to its session's
// partition (the stream's subject transform applies to a batch's messages as
// to single ones).
func TestInputGroupCommit(t *testing.T) {
	b := embedded(t) // fsync on every write: the default
	const n = 16
	sids, inputs, want := make([]string, n), make([]wire.Input, n), make([]string, n)
	for i := range n {
		sids[i] = fmt.Sprintf("s_inb%02d", i)
		inputs[i] = wire.Input{ID: fmt.Sprintf("in_b%02d", i), Command: wire.CommandRun, Text: "hello"}
		want[i] = sids[i] + " " + inputs[i].ID
	}
	storeQueued(t, b, sids, inputs)
	if got := b.inputCommit.batches.Load(); got != 1 || b.inputCommit.batched.Load() != n {
		t.Fatalf("%d batches of %d inputs, want 1 of %d", got, b.inputCommit.batched.Load(), n)
	}
	got := delivered(t, b, n)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	// A lone input afterwards goes alone.
	if _, err := b.PublishInput(ctxT(t), "s_inlone", wire.Input{Command: wire.CommandRun, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := b.inputCommit.batches.Load(); got != 1 {
		t.Fatalf("%d batches after a lone input, want still 1", got)
	}
}

// TestInputGroupCommitDuplicate puts an input sent again (its id stored
// already) in a batch: the batch is refused as a whole, and every member is
// then stored alone, the duplicate once.
func TestInputGroupCommitDuplicate(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t)
	const n, dup = 5, 2
	sids, inputs := make([]string, n), make([]wire.Input, n)
	for i := range n {
		sids[i] = fmt.Sprintf("s_ind%02d", i)
		inputs[i] = wire.Input{ID: fmt.Sprintf("in_d%02d", i), Command: wire.CommandRun, Text: "hello"}
	}
	if _, err := b.PublishInput(ctxT(t), sids[dup], inputs[dup]); err != nil {
		t.Fatal(err)
	}
	storeQueued(t, b, sids, inputs)
	if got := b.inputCommit.batches.Load(); got != 0 {
		t.Fatalf("%d batches committed, want none (one held a duplicate)", got)
	}
	info, err := b.in.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("TAH_IN holds %d inputs, want %d (the duplicate once)", info.State.Msgs, n)
	}
	if got := delivered(t, b, n); len(got) != n {
		t.Fatalf("delivered %v", got)
	}
}

// An input without a Nats-Msg-Id is refused before it is sent: it could not
// be retried without being stored twice.
func TestStoreInputNeedsAnID(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	m, _, err := natsx.NewInputMsg("s_noid", wire.NodeSender, wire.Input{Command: wire.CommandRun, Text: "x"}, int64(b.MaxPayload()))
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Del(wire.HeaderMsgID)
	if _, err := b.storeInput(ctxT(t), m); err == nil {
		t.Fatal("stored an input without its id")
	}
}
