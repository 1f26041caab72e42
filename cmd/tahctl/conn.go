package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// defaultURL is where a node listens when nothing says otherwise.
const defaultURL = "nats://127.0.0.1:4222"

// globals are the options every command takes, and the process's streams.
type globals struct {
	server  string
	dataDir string
	creds   string
	tlsCA   string
	json    bool
	timeout time.Duration

	stdout, stderr io.Writer
	stdin          io.Reader
	// getenv reads the environment (os.Getenv; tests replace it).
	getenv func(string) string
}

// register defines the global flags on fs. Each command's flag set has them
// too, so that they may come before or after the command's name.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", g.server, "NATS URL of the node ($TAH_URL; default: from the data directory's node.json, else "+defaultURL+")")
	fs.StringVar(&g.dataDir, "data-dir", g.dataDir, "the node's data directory, for its address and credentials ($TAH_DATA_DIR; default: .tah here or in a parent)")
	fs.StringVar(&g.creds, "creds", g.creds, "NATS credential, a .creds file ($TAH_NATS_CREDS; default: the data directory's admin.creds)")
	fs.StringVar(&g.tlsCA, "tls-ca", g.tlsCA, "CA file (PEM) to verify a node that serves TLS (a tls:// URL) against ($TAH_TLS_CA; default: the one node.json names)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON (one object per line for streams)")
	fs.Var((*positiveDuration)(&g.timeout), "timeout", "how long to wait for the node to answer a request")
}

// positiveDuration is a duration flag that refuses zero and negative values
// when it is parsed: a zero timeout would fail every request at once.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }

func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (use a number with a unit, such as 10s or 2m)")
	}
	if v <= 0 {
		return errors.New("must be positive, such as 10s or 2m")
	}
	*d = positiveDuration(v)
	return nil
}

// endpoint is where and how to connect, and where that came from.
type endpoint struct {
	url, creds, tlsCA  string
	urlFrom, credsFrom string
	dataDir            string
}

// resolve finds the node: flags, then the environment, then the data
// directory's node.json and admin.creds, then the default.
func (g *globals) resolve() endpoint {
	ep := endpoint{url: g.server, urlFrom: "--server", creds: g.creds, credsFrom: "--creds", tlsCA: g.tlsCA}
	if ep.tlsCA == "" {
		ep.tlsCA = g.getenv("TAH_TLS_CA")
	}
	if ep.url == "" {
		if ep.url = g.getenv("TAH_URL"); ep.url != "" {
			ep.urlFrom = "TAH_URL"
		}
	}
	if ep.creds == "" {
		ep.creds, ep.credsFrom = g.getenv("TAH_NATS_CREDS"), "TAH_NATS_CREDS"
	}
	ep.dataDir = g.dataDir
	if ep.dataDir == "" {
		ep.dataDir = g.getenv("TAH_DATA_DIR")
	}
	if ep.dataDir == "" {
		if wd, err := os.Getwd(); err == nil {
			ep.dataDir = localnode.Find(wd, ".tah")
		}
	}
	if ep.dataDir != "" {
		if ep.url == "" {
			if info, err := localnode.ReadNodeInfo(ep.dataDir); err == nil && info.URL != "" {
				ep.url, ep.urlFrom = info.URL, filepath.Join(ep.dataDir, localnode.NodeInfoFile)
				if ep.tlsCA == "" {
					ep.tlsCA = info.TLSCA
				}
			}
		}
		if ep.creds == "" {
			if path := localnode.AdminCredsPath(ep.dataDir); fileExists(path) {
				ep.creds, ep.credsFrom = path, path
			}
		}
	}
	if ep.url == "" {
		ep.url, ep.urlFrom = defaultURL, "the default"
	}
	if ep.creds == "" {
		ep.credsFrom = ""
	}
	return ep
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// conn is tahctl's connection to the node: the client, and where it was
// found, for messages.
type conn struct {
	*client.Client
	g  *globals
	ep endpoint
	// states receives "disconnected" and "reconnected" as they happen.
	states chan client.ConnEvent

	mu      sync.Mutex
	retried map[string]bool // the operations whose retry was told
}

// connect connects to the node, or fails with exitUnavailable and what to do.
func (g *globals) connect(ctx context.Context) (*conn, error) {
	ep := g.resolve()
	c := &conn{g: g, ep: ep, states: make(chan client.ConnEvent, 16)}
	cl, err := client.Connect(ctx, client.Options{
		URL: ep.url, CredsFile: ep.creds, TLSCAFile: ep.tlsCA, Name: "tahctl", RequestTimeout: g.timeout,
		OnConnection: func(e client.ConnEvent) {
			select {
			case c.states <- e:
			default:
			}
		},
		OnRetry: c.retrying,
	})
	if err != nil {
		return nil, ep.connectError(err)
	}
	c.Client = cl
	return c, nil
}

// retrying tells, once per operation, that NATS does not answer for the
// moment and the operation is tried again (a stream is electing a leader
// after a server failed), so that a wait of some seconds is never silent.
func (c *conn) retrying(what string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.g.json || c.retried[what] {
		return
	}
	if c.retried == nil {
		c.retried = map[string]bool{}
	}
	c.retried[what] = true
	st := newStyle(c.g, c.g.stderr)
	fmt.Fprintln(c.g.stderr, st.yellow("! NATS does not answer ("+what+": "+err.Error()+"); a server may have just failed: trying again"))
}

func (ep endpoint) connectError(err error) error {
	var ce *client.ConnectError
	if !errors.As(err, &ce) {
		return errorf(exitUnavailable, "check --server and the credentials", "%v", err)
	}
	if errors.Is(err, client.ErrTLS) {
		how := "tahctl verified it against the CA " + ep.tlsCA
		if ep.tlsCA == "" {
			how = "tahctl was given no CA, and the system's roots do not know the server's"
		}
		return errorf(exitUnavailable,
			"give the CA that signed the node's certificate with --tls-ca FILE (TAH_TLS_CA); docs/security.md, \"TLS\"",
			"the TLS handshake with the node at %s failed (%s): %v", ep.url, how, ce.Err)
	}
	if errors.Is(err, client.ErrAuth) {
		how := "tahctl used the credential " + ep.creds
		if ep.credsFrom != "--creds" && ep.credsFrom != ep.creds {
			how += " (" + ep.credsFrom + ")"
		}
		if ep.creds == "" {
			how = "tahctl found no credential"
		}
		return errorf(exitUnavailable,
			"run tahctl in the directory where tah-node runs (it reads .tah/admin.creds), or give --data-dir DIR, or a credential with --creds FILE (TAH_NATS_CREDS)",
			"the node at %s refused the credential (%s)", ep.url, how)
	}
	where := ep.url
	if ep.urlFrom != "--server" {
		where += " (" + ep.urlFrom + ")"
	}
	try := "start a node with `tah-node` (in your project's directory), or point tahctl at one with --server URL (TAH_URL)"
	if strings.HasSuffix(ep.urlFrom, localnode.NodeInfoFile) {
		try = "the node that wrote " + ep.urlFrom + " is gone: start it again with `tah-node`, or point tahctl elsewhere with --server URL"
	}
	return errorf(exitUnavailable, try, "no TAH node answers at %s: %v", where, ce.Err)
}

// failed is the error of an API call to endpoint that failed: what it
// means, its exit code and what to do.
func (c *conn) failed(endpoint string, err error) error {
	subj := wire.APISubject(endpoint)
	var ae *client.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		switch ae.Code {
		case wire.APIErrNotFound:
			return errorf(exitNotFound, "`tahctl list` shows the sessions", "%s", ae.Message)
		case wire.APIErrBadRequest:
			return errorf(exitUsage, "`tahctl help` shows the commands and their arguments", "%s", ae.Message)
		case wire.APIErrConflict:
			return errorf(exitFailed, "", "%s", ae.Message)
		case wire.APIErrTooLarge:
			return errorf(exitFailed, "ask for less: `tahctl events --from SEQ`", "%s", ae.Message)
		case wire.APIErrQuota: // the message says what to do
			return errorf(exitFailed, "", "%s [%s]", ae.Message, event.CodeQuotaExceeded)
		}
		return errorf(exitFailed, "see the node's log", "%s failed (%s): %s", subj, ae.Code, ae.Message)
	case errors.Is(err, client.ErrPermissionDenied):
		return c.denied("call "+subj, err)
	case errors.Is(err, client.ErrNoReadModel):
		return errorf(exitUnavailable, "start a node that holds the read model: read_model=true, the default (TAH_READ_MODEL, --read-model; docs/operations.md, Read model and workers)",
			"%v", err)
	case errors.Is(err, client.ErrNoNode):
		return errorf(exitUnavailable, "start a node with `tah-node`; `tahctl status` checks",
			"NATS answers at %s, but no TAH node serves the API (%s)", c.ep.url, subj)
	case errors.Is(err, client.ErrUnavailable):
		return errorf(exitUnavailable, "check the node's log; raise --timeout if it is busy",
			"the node did not answer %s within %v", subj, c.g.timeout)
	}
	return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "%s: %v", subj, err)
}

// checkID refuses what cannot be a session id before it reaches a subject.
func checkID(id string) error {
	if id == "" {
		return usageError("`tahctl list` shows the sessions", "no session id given")
	}
	if err := event.ValidSessionID(id); err != nil {
		return usageError("`tahctl list` shows the sessions; ids look like s_4f2k9q1w7e3r5t6y8v0b, or acme.s_4f2k9q1w7e3r5t6y8v0b for tenant acme",
			"%q is not a session id: %v", id, err)
	}
	return nil
}

// notFound is the error of a session that does not exist.
func notFound(id string) error {
	return errorf(exitNotFound, "`tahctl list` shows the sessions", "session %s not found", id)
}

// getSession returns the session's row; exitNotFound when there is none.
func (c *conn) getSession(ctx context.Context, id string) (wire.SessionSummary, error) {
	if err := checkID(id); err != nil {
		return wire.SessionSummary{}, err
	}
	v, err := c.Get(ctx, id)
	if errors.Is(err, client.ErrNotFound) {
		return v, notFound(id)
	}
	return v, c.failed(wire.EndpointGet, err)
}
