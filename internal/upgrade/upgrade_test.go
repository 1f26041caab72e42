package upgrade_test

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
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/upgrade"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/tahtest/upgradetest"
	"github.com/tah-dev/tah/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// jsOf is a JetStream context of the connection nc, closed at the end of
// the test.
func jsOf(t *testing.T, nc *nats.Conn, err error) jetstream.JetStream {
	t.Helper()
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
// its sequence, with the checkpoint, the artifact and the pending input; a
// second copy is refused and changes nothing.
func TestCopyKeepsTheSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster: not in -short")
	}
	old := upgradetest.OldCluster(t)
	nb, dir := upgradetest.NewNode(t)
	nc, err := nats.Connect(nb.ClientURL(), nats.UserCredentials(auth.NodeCredsPath(dir)))
	to := jsOf(t, nc, err)
	from := func() jetstream.JetStream {
		nc, err := upgrade.ConnectLegacy(ctxT(t), old.URL, old.Credentials)
		return jsOf(t, nc, err)
	}
	var told []string
	got, err := upgrade.Copy(ctxT(t), from(), to, func(s upgrade.Stream) { told = append(told, s.String()) })
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	t.Logf("copied:\n%s", strings.Join(told, "\n"))
	if len(told) != len(got) {
		t.Errorf("told %d streams, copied %d", len(told), len(got))
	}
	for _, s := range got {
		if s.Name == "KV_"+wire.NodeBucket && s.Skipped == "" {
			t.Errorf("the nodes' presence was copied: %+v", s)
		}
	}
	for sid, want := range old.Sessions {
		evs, _, err := nb.Replay(ctxT(t), sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(evs, want, func(a, b event.Event) bool { return a.Seq == b.Seq && string(a.Data) == string(b.Data) }) {
			t.Errorf("%s after the copy: %v, want %v", sid, evs, want)
		}
	}
	if e, err := nb.Checkpoints().Get(ctxT(t), "s_old1"); err != nil || string(e.Value()) != old.Checkpoint {
		t.Errorf("the checkpoint: %v, %v", e, err)
	}
	if b, err := nb.Artifacts().GetBytes(ctxT(t), old.Artifact); err != nil || string(b) != old.ArtifactContent {
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
	if _, err = upgrade.Copy(ctxT(t), from(), to, nil); !errors.Is(err, upgrade.ErrNotEmpty) {
		t.Fatalf("a second copy: %v, want ErrNotEmpty", err)
	}
	for sid, want := range old.Sessions {
		if evs, _, _ := nb.Replay(ctxT(t), sid, 1); len(evs) != len(want) {
			t.Errorf("%s has %d events after the refused copy, want %d", sid, len(evs), len(want))
		}
	}
}

// TestCopyIntoACluster: the copy's target is a cluster of three TAH nodes of
// the operator era (R3 streams, one trust), as the procedure starts it; the
// log is there at the same sequences, and every node's read model takes the
// copied sessions in.
func TestCopyIntoACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two three-server clusters: not in -short")
	}
	old := upgradetest.OldCluster(t)
	c := tahtest.Start(t, tahtest.Options{Nodes: 3})
	nc, err := nats.Connect(c.URLs(), nats.UserCredentials(c.Layout().Creds))
	to := jsOf(t, nc, err)
	oc, err := upgrade.ConnectLegacy(ctxT(t), old.URL, old.Credentials)
	if _, err := upgrade.Copy(ctxT(t), jsOf(t, oc, err), to, nil); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	for sid, want := range old.Sessions {
		evs, err := c.Log(sid)
		if err != nil {
			t.Fatal(err)
		}
		// The copied records come first (a turn of the copied pending input
		// may follow).
		if len(evs) < len(want) || !slices.EqualFunc(evs[:len(want)], want, func(a, b event.Event) bool { return a.Seq == b.Seq && string(a.Data) == string(b.Data) }) {
			t.Errorf("%s in the new cluster: %v, want %v first", sid, evs, want)
		}
		for i := range c.Size() {
			err := natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
				_, err := c.Node(i).ReadModel().GetSession(ctxT(t), sid)
				return err
			})
			if err != nil {
				t.Errorf("%s is not in node %s's read model: %v", sid, c.ID(i), err)
			}
		}
	}
	// The input that no node of the old cluster took runs in the new one.
	err = natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
		evs, err := c.Log(old.PendingSession)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Type == event.AgentFinished {
				return nil
			}
		}
		return fmt.Errorf("%d events, no agent.finished", len(evs))
	})
	if err != nil {
		t.Errorf("the pending input %s of %s did not run in the new cluster: %v", old.PendingInput, old.PendingSession, err)
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
	if _, err := upgrade.ConnectLegacy(ctxT(t), "nats://127.0.0.1:1", write("empty.json", `{"user":"tah"}`)); !errors.Is(err, upgrade.ErrNoLegacyUser) {
		t.Errorf("no password: %v", err)
	}
	if _, err := upgrade.ConnectLegacy(ctxT(t), "nats://127.0.0.1:1", write("creds", "SUxxx")); err == nil {
		t.Error("a .creds file taken for credentials.json")
	}
	srv := natstest.StartWith(t, 1, func(o *server.Options) {
		o.Users = []*server.User{{Username: "tah", Password: "old"}}
		o.Cluster = server.ClusterOpts{}
		o.Routes = nil
	})
	_, err := upgrade.ConnectLegacy(ctxT(t), srv.URLs(), write("wrong.json", `{"user":"tah","password":"wrong"}`))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a wrong password: %v", err)
	}
}
