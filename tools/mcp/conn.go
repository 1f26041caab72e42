package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tahtools "github.com/tah-dev/tah/tools"
)

// conn is one connection to a server, with the tools it listed: a restart
// makes a new one.
type conn struct {
	server string
	sess   *sdk.ClientSession
	tools  []tahtools.Tool
	// problems are the tools listed but not served, each with why.
	problems []string
	down     atomic.Bool
	// changed receives the server's notifications/tools/list_changed.
	changed chan struct{}
	// guard refuses the calls that name protected paths (Options.Protect).
	guard *guard
	// stderr is a stdio server's: its run ends with the session (close).
	stderr *logWriter
}

// close ends the session (a stdio server's process with it) and logs what
// its stderr left.
func (c *conn) close() {
	_ = c.sess.Close()
	if c.stderr != nil {
		c.stderr.finish()
	}
}

func (c *conn) isDown() bool { return c.down.Load() }

// names returns the TAH names of the conn's tools.
func (c *conn) names() []string {
	out := make([]string, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.Name()
	}
	return out
}

// keepAliveMisses is how many pings in a row a server may miss before it is
// taken for dead: one may be lost to a busy moment.
const keepAliveMisses = 2

// dial starts (stdio) or reaches (HTTP) the server, initializes the session
// and lists its tools, within opts.ConnectTimeout. A stdio server's stderr
// is logged within lim, at the server's rate.
func dial(ctx context.Context, name string, cfg ServerConfig, opts Options, lim stderrLimits, rate *tokenBucket) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	changed := make(chan struct{}, 1)
	client := sdk.NewClient(&sdk.Implementation{Name: "tah", Title: "TAH MCP bridge", Version: opts.Version},
		&sdk.ClientOptions{KeepAlive: opts.KeepAlive, KeepAliveFailureThreshold: keepAliveMisses, Logger: opts.Logger.With("mcp_server", name),
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default: // one is pending already
				}
			}})
	var stderr *logWriter
	var t sdk.Transport
	if cfg.stdio() {
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = serverEnv(cfg.Env)
		cmd.Dir = cfg.Cwd
		stderr = newLogWriter(opts.Logger.With("mcp_server", name), lim, rate)
		cmd.Stderr = stderr
		t = &sdk.CommandTransport{Command: cmd}
	} else {
		hc := http.DefaultClient
		if len(cfg.Headers) > 0 {
			hc = &http.Client{Transport: headerTransport{headers: cfg.Headers, next: http.DefaultTransport}}
		}
		t = &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc}
	}
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		if stderr != nil {
			stderr.finish()
		}
		return nil, fmt.Errorf("MCP server %s: connect: %w", name, err)
	}
	c := &conn{server: name, sess: sess, changed: changed, stderr: stderr, guard: opts.Protect.guard(cfg.Cwd)}
	if err := c.list(ctx); err != nil {
		c.close()
		return nil, fmt.Errorf("MCP server %s: list its tools: %w", name, err)
	}
	return c, nil
}

// list reads the server's tools (every page) into c.tools, in the server's
// order; a tool that cannot be served is in c.problems instead.
func (c *conn) list(ctx context.Context) error {
	c.tools, c.problems = nil, nil
	seen := map[string]string{}
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		name, err := ToolName(c.server, t.Name)
		if err != nil {
			c.problems = append(c.problems, err.Error())
			continue
		}
		if other, ok := seen[name]; ok {
			c.problems = append(c.problems, fmt.Sprintf("tool %q of server %s is named %s like tool %q: it is skipped (rename one of them on the server)", t.Name, c.server, name, other))
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err == nil {
			_, err = tahtools.CompileSchema(schema)
		}
		if err != nil {
			c.problems = append(c.problems, fmt.Sprintf("tool %q of server %s is skipped: its input schema is malformed: %s", t.Name, c.server, strings.Join(strings.Fields(err.Error()), " ")))
			continue
		}
		seen[name] = t.Name
		idem := t.Annotations != nil && (t.Annotations.ReadOnlyHint || t.Annotations.IdempotentHint)
		asks := t.Annotations == nil || !t.Annotations.ReadOnlyHint
		c.tools = append(c.tools, &tool{name: name, remote: t.Name, desc: t.Description, schema: schema, idempotent: idem, asks: asks, conn: c})
	}
	slices.SortFunc(c.tools, func(a, b tahtools.Tool) int { return cmp.Compare(a.Name(), b.Name()) })
	return nil
}

// headerTransport adds the configured headers (an API key, say) to every
// request of a Streamable HTTP server.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}
