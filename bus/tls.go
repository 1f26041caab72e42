package bus

import (
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/internal/natsx"
)

// TLSConfig is the TLS of a Bus: of the embedded server's client port and
// routes, or of the connection to an external server. Its files are PEM.
//
// Embedded: CertFile and KeyFile turn TLS on, for clients and routes alike
// (no plain connection is then accepted; the Bus's own in-process connection
// needs none). A cluster's routes then also need CAFile: each server presents
// its certificate to the others and verifies theirs against CAFile, so that
// only servers of the deployment join. VerifyClients asks clients too for a
// certificate signed by CAFile (mutual TLS) beside their credentials.
//
// External (Config.URL set): CAFile is what the server's certificate is
// verified against (empty: the system's roots), and CertFile and KeyFile are
// the Bus's certificate for a server that asks for mutual TLS.
type TLSConfig struct {
	CertFile string `json:"cert,omitempty"`
	KeyFile  string `json:"key,omitempty"`
	CAFile   string `json:"ca,omitempty"`
	// VerifyClients, embedded, requires clients to present a certificate
	// signed by CAFile.
	VerifyClients bool `json:"verify_clients,omitempty"`
}

// tlsTimeout bounds a TLS handshake on the embedded server, in seconds.
const tlsTimeout = 5

// On reports whether the embedded server serves TLS.
func (t TLSConfig) On() bool { return t.CertFile != "" }

// validate reports what is wrong with t for a Bus that embeds a server or
// not, and with or without routes.
func (t TLSConfig) validate(embedded, routes bool) error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("tls: give both a certificate and its key (cert %q, key %q)", t.CertFile, t.KeyFile)
	}
	for _, f := range []struct{ name, path string }{{"cert", t.CertFile}, {"key", t.KeyFile}, {"ca", t.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("tls: %s file: %v", f.name, err)
		}
	}
	if !embedded {
		if t.VerifyClients {
			return fmt.Errorf("tls: verify_clients is for an embedded server (with a URL, the external server decides)")
		}
		return nil
	}
	switch {
	case t.CAFile != "" && !t.On():
		return fmt.Errorf("tls: a CA file without a certificate and key: the embedded server serves TLS only with its own certificate (give cert and key)")
	case t.VerifyClients && t.CAFile == "":
		return fmt.Errorf("tls: verify_clients needs a CA file to verify the clients' certificates against")
	case routes && t.On() && t.CAFile == "":
		return fmt.Errorf("tls: the routes of a cluster with TLS need a CA file, to verify the other servers' certificates")
	}
	return nil
}

// serverTLS turns TLS on in opts as t says: the client port, and the routes
// when opts has a cluster (each side verifying the other against the CA).
func serverTLS(opts *server.Options, t TLSConfig) error {
	if !t.On() {
		return nil
	}
	clients, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: t.VerifyClients})
	if err != nil {
		return fmt.Errorf("TLS of the client port: %w", err)
	}
	opts.TLS, opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = true, clients, t.VerifyClients, tlsTimeout
	if opts.Cluster.Name == "" {
		return nil
	}
	routes, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: true})
	if err != nil {
		return fmt.Errorf("TLS of the routes: %w", err)
	}
	// A route is a client of the server it dials and a server to the one
	// that dials it: both verify the other against the CA.
	routes.RootCAs = routes.ClientCAs
	opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = routes, tlsTimeout
	return nil
}

// clientTLS is the connection options of t for a connection to an external
// server.
func clientTLS(t TLSConfig) []nats.Option {
	return natsx.TLSOptions(t.CAFile, t.CertFile, t.KeyFile)
}
