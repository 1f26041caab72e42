// Package upgradetest builds, for tests, the two sides of an upgrade of a
// cluster: a cluster of the user-and-password era with sessions in it, and a
// node of the operator era started afresh.
//
//	old := upgradetest.OldCluster(t)
//	nb, dir := upgradetest.NewNode(t)
//	// tahctl --data-dir dir upgrade-cluster --from old.URL --from-credentials old.Credentials
package upgradetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// Old is a cluster of the user-and-password era that OldCluster wrote.
type Old struct {
	// URL is the servers' client URLs, comma-separated.
	URL string
	// Credentials is the path of its credentials.json.
	Credentials string
	// Sessions are the events of its sessions, as its log holds them.
	Sessions map[string][]event.Event
	// Checkpoint is the value of s_old1's checkpoint; Artifact and
	// ArtifactContent, an object of the object store; PendingInput, the id
	// of an input of PendingSession that no node took yet.
	Checkpoint, Artifact, ArtifactContent, PendingInput, PendingSession string
}

// OldCluster runs a cluster of the user-and-password era: three servers
// with clustered JetStream and no operator, whose one user (tah, password
// old) is in the global account $G; TAH's streams set up through it with
// R3, four sessions of completed turns written, a checkpoint, an artifact,
// an input pending.
func OldCluster(t testing.TB) Old {
	t.Helper()
	c := natstest.StartWith(t, 3, func(o *server.Options) {
		o.Users = []*server.User{{Username: "tah", Password: "old"}}
		o.NoAuthUser = "tah" // the bus below connects without a password
	})
	cfg := bus.Default()
	cfg.URL, cfg.Replicas, cfg.Partitions = c.URLs(), 3, 2
	b := Open(t, cfg)
	ctx := ctxT(t)
	old := Old{URL: c.URLs(), Sessions: map[string][]event.Event{}, Checkpoint: `{"last_seq":3}`,
		Artifact: "calls/s_old1/call_1/output.txt", ArtifactContent: "a large output", PendingInput: "in_pending", PendingSession: "s_old2"}
	for i := range 4 {
		sid := fmt.Sprintf("s_old%d", i)
		w, err := b.Writer(sid, 1, 0)
		check(t, err)
		_, err = w.Append(ctx, event.MustNew(sid, event.SessionCreated, event.SessionCreatedData{}))
		check(t, err)
		for n := range i + 1 { // completed turns, so that no node takes them up again
			_, err := w.Append(ctx,
				event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: n + 1, Message: llm.User(fmt.Sprintf("%s #%d", sid, n))}),
				event.MustNew(sid, event.AgentFinished, event.AgentFinishedData{Turn: n + 1, Content: "done", Steps: 1}))
			check(t, err)
		}
		old.Sessions[sid], _, err = b.Replay(ctx, sid, 1)
		check(t, err)
	}
	_, err := b.Checkpoints().Put(ctx, "s_old1", []byte(old.Checkpoint))
	check(t, err)
	_, err = b.Artifacts().PutBytes(ctx, old.Artifact, []byte(old.ArtifactContent))
	check(t, err)
	msg, _, err := natsx.NewInputMsg(old.PendingSession, wire.NodeSender, wire.Input{ID: old.PendingInput, Command: wire.CommandRun, Text: "still to run"}, 1<<20)
	check(t, err)
	_, err = b.JetStream().PublishMsg(ctx, msg)
	check(t, err)
	old.Credentials = filepath.Join(t.TempDir(), "credentials.json")
	check(t, os.WriteFile(old.Credentials, []byte(`{"user":"tah","password":"old"}`), 0o600))
	return old
}

// NewNode opens the bus of a node of the operator era on a new data
// directory, as a node of the new cluster starts: its embedded server in
// operator mode, TAH's streams created empty, node.creds in the directory.
func NewNode(t testing.TB) (*bus.Bus, string) {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	return Open(t, cfg), cfg.DataDir
}

// Open opens a bus with cfg and closes it at the end of the test.
func Open(t testing.TB, cfg bus.Config) *bus.Bus {
	t.Helper()
	b, err := bus.Open(ctxT(t), cfg)
	check(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("upgradetest: %v", err)
	}
}
