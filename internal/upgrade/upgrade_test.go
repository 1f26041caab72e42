package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func openBus(t *testing.T, cfg bus.Config) *bus.Bus {
	t.Helper()
	b, err := bus.Open(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("bus.Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// oldCluster is a cluster of the user-and-password era: three servers with
// clustered JetStream and no operator, whose one user (tah, password old)
// is in the global account $G; TAH's streams set up through it with R3,
// sessions written, a checkpoint, an input still pending. It returns the
// cluster's URLs, the path of its credentials.json and the sessions.
func oldCluster(t *testing.T) (string, string, map[string][]event.Event) {
	t.Helper()
	c := natstest.StartWith(t, 3, func(o *server.Options) {
		o.Users = []*server.User{{Username: "tah", Password: "old"}}
		o.NoAuthUser = "tah" // the test's own bus connects without a password
	})
	cfg := bus.Default()
	cfg.URL, cfg.Replicas, cfg.Partitions = c.URLs(), 3, 2
	b := openBus(t, cfg)
	sessions := map[string][]event.Event{}
	for i := range 4 {
		sid := fmt.Sprintf("s_old%d", i)
		w, err := b.Writer(sid, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for n := range i + 2 {
			ev := event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: n + 1, Message: llm.User(fmt.Sprintf("%s #%d", sid, n))})
			if _, err := w.Append(ctxT(t), ev); err != nil {
				t.Fatal(err)
			}
		}
		evs, _, err := b.Replay(ctxT(t), sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		sessions[sid] = evs
	}
	if _, err := b.Checkpoints().Put(ctxT(t), "s_old1", []byte(`{"last_seq":3}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Artifacts().PutBytes(ctxT(t), "calls/s_old1/call_1/output.txt", []byte("a large output")); err != nil {
		t.Fatal(err)
	}
	msg, _, err := natsx.NewInputMsg("s_old2", wire.Input{ID: "in_pending", Command: wire.CommandRun, Text: "still to run"}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JetStream().PublishMsg(ctxT(t), msg); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"user":"tah","password":"old"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return c.URLs(), creds, sessions
}

// newNode is a node of the operator era, started afresh: its embedded
// server in operator mode, TAH's streams created empty. It returns the
// node's bus and a JetStream context of the node's own credential.
func newNode(t *testing.T) (*bus.Bus, jetstream.JetStream) {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	b := openBus(t, cfg)
	nc, err := nats.Connect(b.ClientURL(), nats.UserCredentials(auth.NodeCredsPath(cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return b, js
}

func legacyJS(t *testing.T, url, creds string) jetstream.JetStream {
	t.Helper()
	nc, err := ConnectLegacy(ctxT(t), url, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestCopyKeepsTheSessions: every session of a clustered store of the
// user-and-password era is in the new cluster after the copy, each event at
// its sequence, with the checkpoint and the pending input; a second copy is
// refused and changes nothing.
func TestCopyKeepsTheSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster: not in -short")
	}
	url, creds, sessions := oldCluster(t)
	nb, to := newNode(t)
	var told []string
	got, err := Copy(ctxT(t), legacyJS(t, url, creds), to, func(s Stream) { told = append(told, s.String()) })
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	t.Logf("copied:\n%s", strings.Join(told, "\n"))
	if len(told) != len(got) {
		t.Errorf("told %d streams, copied %d", len(told), len(got))
	}
	copied := map[string]Stream{}
	for _, s := range got {
		copied[s.Name] = s
	}
	if s := copied["KV_"+wire.NodeBucket]; s.Skipped == "" {
		t.Errorf("the nodes' presence was copied: %+v", s)
	}
	for sid, want := range sessions {
		evs, _, err := nb.Replay(ctxT(t), sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(evs, want, func(a, b event.Event) bool { return a.Seq == b.Seq && string(a.Data) == string(b.Data) }) {
			t.Errorf("%s after the copy: %v, want %v", sid, evs, want)
		}
	}
	if e, err := nb.Checkpoints().Get(ctxT(t), "s_old1"); err != nil || string(e.Value()) != `{"last_seq":3}` {
		t.Errorf("the checkpoint: %v, %v", e, err)
	}
	if b, err := nb.Artifacts().GetBytes(ctxT(t), "calls/s_old1/call_1/output.txt"); err != nil || string(b) != "a large output" {
		t.Errorf("the artifact: %q, %v", b, err)
	}
	in, err := to.Stream(ctxT(t), wire.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := in.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("TAH_IN holds %d input(s) after the copy, want the pending one", n)
	}

	// Again: refused before anything is written.
	_, err = Copy(ctxT(t), legacyJS(t, url, creds), to, nil)
	if !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second copy: %v, want ErrNotEmpty", err)
	}
	for sid, want := range sessions {
		if evs, _, _ := nb.Replay(ctxT(t), sid, 1); len(evs) != len(want) {
			t.Errorf("%s has %d events after the refused copy, want %d", sid, len(evs), len(want))
		}
	}
}

func TestConnectLegacyRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := ConnectLegacy(ctxT(t), "nats://127.0.0.1:1", write("empty.json", `{"user":"tah"}`)); !errors.Is(err, ErrNoLegacyUser) {
		t.Errorf("no password: %v", err)
	}
	if _, err := ConnectLegacy(ctxT(t), "nats://127.0.0.1:1", write("creds", "SUxxx")); err == nil {
		t.Error("a .creds file taken for credentials.json")
	}
	srv := natstest.StartWith(t, 1, func(o *server.Options) {
		o.Users = []*server.User{{Username: "tah", Password: "old"}}
		o.Cluster = server.ClusterOpts{}
		o.Routes = nil
	})
	_, err := ConnectLegacy(ctxT(t), srv.URLs(), write("wrong.json", `{"user":"tah","password":"wrong"}`))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a wrong password: %v", err)
	}
}
