package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// defaultURL is where a node listens when nothing says otherwise.
const defaultURL = "nats://127.0.0.1:4222"

// globals are the options every command takes, and the process's streams.
type globals struct {
	server   string
	dataDir  string
	user     string
	password string
	json     bool
	timeout  time.Duration

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
	fs.StringVar(&g.user, "user", g.user, "NATS user ($TAH_NATS_USER; default: from the data directory's credentials.json)")
	fs.StringVar(&g.password, "password", g.password, "NATS password ($TAH_NATS_PASSWORD)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON (one object per line for streams)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long to wait for the node to answer a request")
}

// endpoint is where and how to connect, and where that came from.
type endpoint struct {
	url, user, password string
	urlFrom, credsFrom  string
	dataDir             string
}

// resolve finds the node: flags, then the environment, then the data
// directory's node.json and credentials.json, then the default.
func (g *globals) resolve() endpoint {
	ep := endpoint{url: g.server, urlFrom: "--server", user: g.user, password: g.password, credsFrom: "--user"}
	if ep.url == "" {
		if ep.url = g.getenv("TAH_URL"); ep.url != "" {
			ep.urlFrom = "TAH_URL"
		}
	}
	if ep.user == "" {
		ep.user, ep.credsFrom = g.getenv("TAH_NATS_USER"), "TAH_NATS_USER"
	}
	if ep.password == "" {
		ep.password = g.getenv("TAH_NATS_PASSWORD")
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
			}
		}
		if ep.user == "" {
			if c, err := localnode.ReadCredentials(ep.dataDir); err == nil {
				ep.user, ep.password = c.User, c.Password
				ep.credsFrom = filepath.Join(ep.dataDir, localnode.CredentialsFile)
			}
		}
	}
	if ep.url == "" {
		ep.url, ep.urlFrom = defaultURL, "the default"
	}
	if ep.user == "" {
		ep.credsFrom = ""
	}
	return ep
}

// client is a connection to the node's NATS.
type client struct {
	g  *globals
	ep endpoint
	nc *nats.Conn
	js jetstream.JetStream
	// conn receives "disconnected" and "reconnected" as they happen.
	conn chan string
}

// connect connects to the node, or fails with exitUnavailable and what to do.
func (g *globals) connect(ctx context.Context) (*client, error) {
	ep := g.resolve()
	c := &client{g: g, ep: ep, conn: make(chan string, 16)}
	note := func(s string) {
		select {
		case c.conn <- s:
		default:
		}
	}
	opts := []nats.Option{
		nats.Name("tahctl"),
		nats.Timeout(3 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { note("disconnected") }),
		nats.ReconnectHandler(func(*nats.Conn) { note("reconnected") }),
	}
	if ep.user != "" {
		opts = append(opts, nats.UserInfo(ep.user, ep.password))
	}
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() { // ends within nats.Timeout
		nc, err := nats.Connect(ep.url, opts...)
		done <- result{nc, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() { // close the connection the abandoned attempt may still make
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, ep.connectError(r.err)
	}
	c.nc = r.nc
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.nc.Close()
		return nil, err
	}
	c.js = js
	return c, nil
}

func (ep endpoint) connectError(err error) error {
	msg := strings.ToLower(err.Error())
	if errors.Is(err, nats.ErrAuthorization) || strings.Contains(msg, "authorization") || strings.Contains(msg, "authentication") {
		var how string
		switch {
		case ep.credsFrom == "":
			how = "tahctl found no credentials"
		default:
			how = "tahctl used the credentials of " + ep.credsFrom
		}
		return errorf(exitUnavailable,
			"run tahctl in the directory where tah-node runs (it reads .tah/credentials.json), or give --data-dir DIR, or set TAH_NATS_USER and TAH_NATS_PASSWORD",
			"the node at %s refused the credentials (%s)", ep.url, how)
	}
	where := ep.url
	if ep.urlFrom != "--server" {
		where += " (" + ep.urlFrom + ")"
	}
	try := "start a node with `tah-node` (in your project's directory), or point tahctl at one with --server URL (TAH_URL)"
	if strings.HasSuffix(ep.urlFrom, localnode.NodeInfoFile) {
		try = "the node that wrote " + ep.urlFrom + " is gone: start it again with `tah-node`, or point tahctl elsewhere with --server URL"
	}
	return errorf(exitUnavailable, try, "no TAH node answers at %s: %v", where, err)
}

// Close closes the connection, sending what is buffered first.
func (c *client) Close() {
	if c.nc != nil {
		_ = c.nc.FlushTimeout(time.Second)
		c.nc.Close()
	}
}

// call sends a request to tah.api.<name> and decodes the reply into resp
// (a *json.RawMessage keeps it as it came). Errors carry the exit code that
// the node's error code means.
func (c *client) call(ctx context.Context, name string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(ctx, wire.APIPrefix+name, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return errorf(exitUnavailable, "start a node with `tah-node`; `tahctl status` checks",
			"NATS answers at %s, but no TAH node serves the API (tah.api.%s)", c.ep.url, name)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return errorf(exitUnavailable, "check the node's log; raise --timeout if it is busy",
			"the node did not answer tah.api.%s within %v", name, c.g.timeout)
	case err != nil:
		return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "tah.api.%s: %v", name, err)
	}
	if code := m.Header.Get(wire.HeaderServiceErrorCode); code != "" {
		return apiError(name, code, m.Header.Get(wire.HeaderServiceError))
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("tah.api.%s: the reply is not what tahctl expects (%v): is the node of another version?", name, err)
	}
	return nil
}

// apiError is the error of a micro error reply.
func apiError(name, code, desc string) error {
	switch code {
	case "404":
		return errorf(exitNotFound, "`tahctl list` shows the sessions", "%s", desc)
	case "400":
		return errorf(exitUsage, "`tahctl help` shows the commands and their arguments", "%s", desc)
	case "409":
		return errorf(exitFailed, "", "%s", desc)
	case "413":
		return &cliError{code: exitFailed, err: &serviceError{code: code, msg: desc}, try: "ask for less: `tahctl events --from SEQ`"}
	}
	return errorf(exitFailed, "see the node's log", "tah.api.%s failed (%s): %s", name, code, desc)
}

// serviceError is an error reply of the API whose code a command handles.
type serviceError struct{ code, msg string }

func (e *serviceError) Error() string { return e.msg }

// tooLarge reports whether err is the API's "the reply would not fit".
func tooLarge(err error) bool {
	var se *serviceError
	return errors.As(err, &se) && se.code == "413"
}

// checkID refuses what cannot be a session id before it reaches a subject.
func checkID(id string) error {
	if id == "" {
		return usageError("`tahctl list` shows the sessions", "no session id given")
	}
	if err := event.ValidSessionID(id); err != nil {
		return usageError("`tahctl list` shows the sessions; ids look like s_4f2k9q1w7e3r5t6y8u0i",
			"%q is not a session id: %v", id, err)
	}
	return nil
}

// getSession returns the session's row; exitNotFound when there is none.
func (c *client) getSession(ctx context.Context, id string) (wire.SessionSummary, error) {
	var v wire.SessionSummary
	if err := checkID(id); err != nil {
		return v, err
	}
	err := c.call(ctx, "get", map[string]string{"session": id}, &v)
	var ce *cliError
	if errors.As(err, &ce) && ce.code == exitNotFound {
		return v, errorf(exitNotFound, "`tahctl list` shows the sessions", "session %s not found", id)
	}
	return v, err
}
