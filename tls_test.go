package tah_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// TestConnectOverTLS: Connect with TLSCA runs a turn on a node that serves
// TLS; without the CA it fails with ErrTLS.
func TestConnectOverTLS(t *testing.T) {
	ctx := ctxT(t)
	files := natstest.WriteTLS(t, t.TempDir())
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	cfg.TLS = bus.TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile}
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: mock.Scripted(mock.Say("sealed").Always()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	admin := tah.CredsFile(localnode.AdminCredsPath(cfg.DataDir))
	if _, err := tah.Connect(ctx, n.Bus().ClientURL(), admin); !errors.Is(err, tah.ErrTLS) {
		t.Fatalf("without the CA: %v, want ErrTLS", err)
	}
	rt, err := tah.Connect(ctx, n.Bus().ClientURL(), admin, tah.TLSCA(files.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Run(ctx, "hello"); err != nil || res.Content != "sealed" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestEmbeddedServerOverTLS: the Go API's embedded server serves TLS when
// its NATS settings give a certificate, and its node.json names the URL and
// the CA, so that tahctl on this machine finds and verifies it.
func TestEmbeddedServerOverTLS(t *testing.T) {
	ctx := ctxT(t)
	files := natstest.WriteTLS(t, t.TempDir())
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	cfg.TLS = bus.TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
	rt := tah.New().Use(tah.NATS(cfg)).Use(tah.LLM(tah.LLMOptions{Instance: mock.Scripted(mock.Say("sealed").Always())}))
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	info, err := localnode.ReadNodeInfo(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.URL, "tls://") || info.TLSCA != files.CAFile {
		t.Fatalf("node.json: url %q, tls_ca %q (want %q)", info.URL, info.TLSCA, files.CAFile)
	}
	remote, err := tah.Connect(ctx, info.URL, tah.CredsFile(localnode.AdminCredsPath(cfg.DataDir)), tah.TLSCA(info.TLSCA))
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close(ctx)
	s, err := tah.Get(remote, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Run(ctx, "hello"); err != nil || res.Content != "sealed" {
		t.Fatalf("%+v %v", res, err)
	}
}
