package tahtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// TestClusterSharesCredentials: the servers of a cluster of embedded nodes
// trust one operator: a credential issued from one member's trust material
// works on every server, and its revocation, pushed to one server, is
// refused by every other without a restart.
func TestClusterSharesCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := Start(t, Options{Nodes: 3})
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.RoleUser(wire.RoleClient, "carol", nil)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "carol.creds")
	if err := os.WriteFile(creds, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	l := c.Layout()
	for i := range l.Slots {
		if err := connectAs(l.Slots[i].URL(), creds); err != nil {
			t.Fatalf("member %d refuses a credential of the cluster's operator: %v", i, err)
		}
	}
	if _, err := trust.Revoke(context.Background(), []string{issued.PublicKey}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := trust.Push(ctx, l.Slots[0].URL()); err != nil {
		t.Fatal(err)
	}
	for i := range l.Slots {
		if err := waitRefused(l.Slots[i].URL(), creds); err != nil {
			t.Fatalf("member %d after the revocation: %v", i, err)
		}
	}
}

// connectAs connects to url with the .creds file at creds, and closes.
func connectAs(url, creds string) error {
	nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.NoReconnect())
	if err == nil {
		nc.Close()
	}
	return err
}

// refused reports whether err is a server's refusal of a credential.
func refused(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthRevoked)
}

// waitRefused waits until the server at url refuses the credential creds.
func waitRefused(url, creds string) error {
	return natstest.Poll(30*time.Second, 100*time.Millisecond, func() error {
		if err := connectAs(url, creds); !refused(err) {
			return errors.New("still accepted")
		}
		return nil
	})
}

// TestClusterRevocationsNeverRollBack: on a cluster of three embedded
// servers, each node with its own copy of the trust material, credentials
// revoked one after the other through the nodes are all refused by all
// three servers (a revocation never signs a node's older account JWT over
// another's), and still after node 0 restarts. Any node of the API's queue
// group answers a request: with five revocations, at least two nodes
// revoke (but once in 80 runs).
func TestClusterRevocationsNeverRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := Start(t, Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := c.Layout()
	admins := make([]*client.Client, len(l.Slots))
	for i := range admins {
		a, err := client.Connect(ctx, client.Options{URL: l.Slots[i].URL(), CredsFile: auth.AdminCredsPath(c.Config(i).DataDir), RequestTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		admins[i] = a
	}
	names := []string{"ann", "ben", "cid", "dan", "eve", "kept"}
	files := map[string]string{}
	for _, name := range names {
		creds, _, err := admins[0].IssueCreds(ctx, name, wire.RoleClient, nil)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = filepath.Join(t.TempDir(), name+".creds")
		if err := os.WriteFile(files[name], creds, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	revoked := names[:len(names)-1]
	for k, name := range revoked {
		if _, err := admins[k%len(admins)].RevokeCreds(ctx, wire.CredsRevokeRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.Slots {
		for _, name := range revoked {
			if err := waitRefused(l.Slots[i].URL(), files[name]); err != nil {
				t.Fatalf("member %d after %s's revocation: %v", i, name, err)
			}
		}
		if err := connectAs(l.Slots[i].URL(), files["kept"]); err != nil {
			t.Fatalf("member %d refuses a credential that was not revoked: %v", i, err)
		}
	}
	c.Restart(0)
	c.WaitReady()
	for i := range l.Slots {
		for _, name := range revoked {
			if err := connectAs(l.Slots[i].URL(), files[name]); !refused(err) {
				t.Fatalf("member %d accepts %s's revoked credential after member 0 restarted: %v", i, name, err)
			}
		}
	}
	admin, err := client.Connect(ctx, client.Options{URL: l.Slots[0].URL(), CredsFile: auth.AdminCredsPath(c.Config(0).DataDir), RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	list, err := admin.ListCreds(ctx)
	if err != nil || len(list) != len(names) {
		t.Fatalf("ls after the restart: %+v %v", list, err)
	}
	for _, cred := range list {
		if cred.Revoked != (cred.Name != "kept") {
			t.Errorf("ls after the restart: %+v", cred)
		}
	}
}
