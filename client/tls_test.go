package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// TestTLS: a node that serves TLS runs the turn of a client that verifies
// it against the CA, and a client without the CA is refused with ErrTLS.
func TestTLS(t *testing.T) {
	files := natstest.WriteTLS(t, t.TempDir())
	n := startNode(t, mock.Scripted(mock.Say("over TLS")), func(c *bus.Config) {
		c.TLS = bus.TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile}
	})
	url := n.Bus().ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("ClientURL = %s, want tls://", url)
	}
	c, err := client.Connect(ctxT(t), client.Options{URL: url, CredsFile: creds(n), TLSCAFile: files.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if o := run(t, c, newSession(t, c), "hi"); o.Content != "over TLS" {
		t.Fatalf("%+v", o)
	}

	for _, u := range []string{url, strings.Replace(url, "tls://", "nats://", 1)} {
		_, err := client.Connect(ctxT(t), client.Options{URL: u, CredsFile: creds(n)})
		var ce *client.ConnectError
		if !errors.Is(err, client.ErrTLS) || errors.Is(err, client.ErrNoServer) || !errors.As(err, &ce) {
			t.Errorf("%s without the CA: %v, want ErrTLS", u, err)
		}
	}
	if _, err := client.Connect(ctxT(t), client.Options{URL: url, TLSCertFile: files.CertFile}); !errors.Is(err, client.ErrInvalidOptions) {
		t.Errorf("a certificate without its key: %v", err)
	}
}
