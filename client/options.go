package client

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// Options say how a Client reaches TAH. Connect uses all of them; New, over
// a connection of its caller's, only RequestTimeout, OnConnection and OnRetry.
type Options struct {
	// URL of the NATS server, or several comma-separated (a cluster).
	URL string
	// CredsFile is the credential: a NATS .creds file (a user JWT and its
	// nkey seed), as tahctl creds add writes it, or a node's admin.creds.
	// Empty for none (a NATS server without authentication).
	CredsFile string
	// TLSCAFile is a PEM file of the CA that signed the server's
	// certificate, for a server that serves TLS with a certificate of its
	// own (a tls:// URL, or a server that requires TLS): the Client verifies
	// the server against it. Empty: the system's roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the Client's certificate and key (PEM),
	// for a server that requires mutual TLS; empty for none.
	TLSCertFile, TLSKeyFile string
	// Name is the connection's name, shown by the server's monitoring;
	// default "tah-client".
	Name string
	// RequestTimeout bounds an API call, retries included (default 10s).
	RequestTimeout time.Duration
	// OnConnection, when set, is told when the connection is lost and when it
	// is back (the Client reconnects by itself, without limit), and when it
	// is closed. It runs on a goroutine of the Client and must not block.
	OnConnection func(ConnEvent)
	// OnRetry, when set, is told each time an operation is tried again because
	// NATS is unavailable for a moment (a stream electing a leader after a
	// server died): what names the operation ("publish the run input", an API
	// endpoint's subject), err says why. It runs on the caller's goroutine and
	// must not block.
	OnRetry func(what string, err error)
	// Sender is the name inputs carry as their sender (wire.InputSubject):
	// the credential's name, which the server's permissions of a credential
	// pin, and the node records as who ran a turn, cancelled it or decided.
	// Default: the name in CredsFile's user JWT, else wire.AnonymousSender:
	// the default tenant's inputs then name nobody, on
	// tah.sess.<sid>.in.by.$anon, which TAH_IN stores at once (on a server
	// that refuses that form, on tah.sess.<sid>.in, through TAH_TIN; New
	// takes that form unless Sender is wire.AnonymousSender). A credential
	// issued before inputs named their sender may not name it: its inputs to
	// the default tenant's sessions name none (tah.sess.<sid>.in).
	Sender string
	// Tenant is the tenant of a credential issued for one (tahctl creds add
	// --tenant): its API requests go to the tenant's API,
	// tah.tapi.<tenant>.<Sender>.<endpoint> (docs/tenancy.md). Default: the
	// tenant CredsFile's user JWT names, else none.
	Tenant string
}

// ConnEvent is a change of the connection's state.
type ConnEvent string

// The connection's changes of state.
const (
	// Disconnected: the connection is lost; the Client is reconnecting.
	Disconnected ConnEvent = "disconnected"
	// Reconnected: the connection is back. Turns and Followers follow the
	// log again from the last event they saw.
	Reconnected ConnEvent = "reconnected"
	// Closed: the connection is closed for good.
	Closed ConnEvent = "closed"
)

// DefaultRequestTimeout is Options.RequestTimeout when it is zero.
const DefaultRequestTimeout = 10 * time.Second

// Validate reports, wrapping ErrInvalidOptions, what is wrong with o.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("client options: "+format+": %w", append(args, ErrInvalidOptions)...)
	}
	switch {
	case o.RequestTimeout < 0:
		return bad("request timeout %v is negative", o.RequestTimeout)
	case (o.TLSCertFile == "") != (o.TLSKeyFile == ""):
		return bad("give both a TLS certificate and its key (cert %q, key %q)", o.TLSCertFile, o.TLSKeyFile)
	case o.Sender != "" && o.Sender != wire.AnonymousSender && wire.ValidCredentialName(o.Sender) != nil:
		return bad("sender %q: %v", o.Sender, wire.ValidCredentialName(o.Sender))
	case o.Tenant != "" && event.ValidTenant(o.Tenant) != nil:
		return bad("tenant: %v", event.ValidTenant(o.Tenant))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "tah-client"
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Sender == "" && o.CredsFile != "" {
		o.Sender = credentialName(o.CredsFile)
	}
	if o.Tenant == "" && o.CredsFile != "" {
		o.Tenant = credentialTenant(o.CredsFile)
	}
	if o.Sender == "" {
		o.Sender = wire.AnonymousSender
	}
	return o
}

// tlsOptions are the connection options of o's TLS files.
func (o Options) tlsOptions() []nats.Option {
	return natsx.TLSOptions(o.TLSCAFile, o.TLSCertFile, o.TLSKeyFile)
}
