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
	connect := func(i int) error {
		nc, err := nats.Connect(l.Slots[i].URL(), nats.UserCredentials(creds), nats.NoReconnect())
		if err == nil {
			nc.Close()
		}
		return err
	}
	for i := range l.Slots {
		if err := connect(i); err != nil {
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
		err := natstest.Poll(30*time.Second, 100*time.Millisecond, func() error {
			if err := connect(i); !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthRevoked) {
				return errors.New("still accepted")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("member %d after the revocation: %v", i, err)
		}
	}
}
