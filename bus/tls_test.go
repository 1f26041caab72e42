package bus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/tahtest/natstest"
)

func TestTLSClientPort(t *testing.T) {
	t.Parallel()
	files := natstest.WriteTLS(t, t.TempDir())
	b := embedded(t, func(c *Config) { c.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile} })
	url := b.ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("ClientURL = %s, want tls://", url)
	}
	admin := auth.AdminCredsPath(b.Config().DataDir)

	t.Run("a client that verifies against the CA", func(t *testing.T) {
		nc, err := nats.Connect(url, nats.RootCAs(files.CAFile), nats.UserCredentials(admin))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if !nc.TLSRequired() {
			t.Fatal("the server does not require TLS")
		}
	})
	t.Run("a client without the CA is refused", func(t *testing.T) {
		nc, err := nats.Connect(url, nats.UserCredentials(admin))
		if err == nil {
			nc.Close()
			t.Fatal("connected without the CA")
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("err = %v, want a certificate error", err)
		}
	})
	t.Run("a plain nats:// client is made to use TLS", func(t *testing.T) {
		nc, err := nats.Connect(strings.Replace(url, "tls://", "nats://", 1), nats.UserCredentials(admin))
		if err == nil {
			nc.Close()
			t.Fatal("connected in plain text")
		}
	})
	t.Run("a Bus on the external server verifies it", func(t *testing.T) {
		ext := connected(t, url, func(c *Config) {
			c.CredsFile = auth.NodeCredsPath(b.Config().DataDir)
			c.TLS.CAFile = files.CAFile
			c.NoSetup = true
		})
		if !ext.Conn().TLSRequired() {
			t.Fatal("the external Bus's connection is not TLS")
		}
	})
}

func TestTLSMutual(t *testing.T) {
	t.Parallel()
	files := natstest.WriteTLS(t, t.TempDir())
	b := embedded(t, func(c *Config) {
		c.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile, VerifyClients: true}
	})
	admin := auth.AdminCredsPath(b.Config().DataDir)
	if nc, err := nats.Connect(b.ClientURL(), nats.RootCAs(files.CAFile), nats.UserCredentials(admin)); err == nil {
		nc.Close()
		t.Fatal("connected without a client certificate")
	}
	nc, err := nats.Connect(b.ClientURL(), nats.RootCAs(files.CAFile), nats.ClientCert(files.CertFile, files.KeyFile), nats.UserCredentials(admin))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestTLSRoutes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three-server cluster: not in -short")
	}
	l := natstest.NewLayout(t, "", 3).WithTrust(t)
	files := natstest.WriteTLS(t, t.TempDir())
	buses := make([]*Bus, len(l.Slots))
	errs := make([]error, len(l.Slots))
	var wg sync.WaitGroup
	for i, s := range l.Slots {
		cfg := Default()
		cfg.DataDir, cfg.Host, cfg.Port, cfg.ServerName, cfg.Replicas, cfg.Partitions = s.Dir, "127.0.0.1", s.ClientPort, s.Name, 3, 2
		cfg.Cluster = ClusterConfig{Name: l.Name, Host: "127.0.0.1", Port: s.RoutePort, Routes: s.Routes}
		cfg.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
		cfg.ReadyTimeout = formingTimeout
		wg.Add(1)
		go func() { // a cluster is ready only once its servers all run
			defer wg.Done()
			buses[i], errs[i] = Open(ctxT(t), cfg)
		}()
	}
	wg.Wait()
	for i, b := range buses {
		if b != nil {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = b.Close(ctx)
			})
		}
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
	}
	for i, b := range buses {
		if n := b.Server().NumRoutes(); n < 2 {
			t.Fatalf("member %d has %d routes, want 2 or more", i, n)
		}
	}
	const sid = "s_tlsroutes"
	w, _ := buses[0].Writer(sid, 1, 0)
	mustAppend(t, w, turn(sid, 0))
	if evs, _ := mustReplay(t, buses[2], sid, 0); len(evs) != 1 {
		t.Fatalf("member 2 reads %d events, want 1", len(evs))
	}
}

func TestTLSConfigRefused(t *testing.T) {
	t.Parallel()
	files := natstest.WriteTLS(t, t.TempDir())
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"a certificate without its key", func(c *Config) { c.TLS.CertFile = files.CertFile }, "both a certificate and its key"},
		{"a missing file", func(c *Config) { c.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile + ".gone"} }, "key file"},
		{"routes without a CA", func(c *Config) {
			c.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile}
			c.Cluster = ClusterConfig{Name: "c", Port: -1}
		}, "need a CA file"},
		{"verify_clients without a CA", func(c *Config) {
			c.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, VerifyClients: true}
		}, "verify_clients needs a CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}
