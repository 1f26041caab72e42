package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tah-dev/tah/inspector"
)

const inspectHelp = `Serves the step inspector (the web UI a node serves on its HTTP port) on
--listen, until Ctrl-C, reading and acting with tahctl's own credential: with a
tenant's (tahctl --creds acme-alice.creds inspect), it lists, shows and drives
that tenant's sessions only, NATS refusing the credential every other
tenant's subject. A loopback address needs no login; any other needs the
token it prints (or the one in --token-file), typed once on the login page.`

// minInspectToken is the shortest login token taken from --token-file.
const minInspectToken = 16

// inspectShutdown bounds how long Ctrl-C waits for the pages being served
// (live pages are closed at once: their streams end with the context).
const inspectShutdown = 5 * time.Second

// runInspect is `tahctl inspect`.
func runInspect(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("inspect", "[--listen ADDR] [--token-file FILE]", inspectHelp)
	listen := fs.String("listen", "127.0.0.1:7070", "the HTTP `address` to serve on (port 0: any free port)")
	tokenFile := fs.String("token-file", "", "read the login token from `FILE` (at least 16 characters) rather than make one; only for an address that is not loopback")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("`tahctl inspect --listen 127.0.0.1:7070`", "inspect takes no arguments, got %q", pos[0])
	}
	token, err := inspectToken(*listen, *tokenFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usageError("choose another address with --listen (port 0 takes any free one)", "inspect: %v", err)
	}
	defer ln.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := inspector.New(inspector.Options{Client: c.Client, Token: token, TokenHint: "tahctl inspect's output", Logger: log})
	if err != nil {
		return errorf(exitFailed, "", "inspect: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String() + "/"
	who := "the sessions " + c.ep.creds + " may see"
	if t := c.Tenant(); t != "" {
		who = "tenant " + t + "'s sessions"
	} else if c.ep.creds == "" {
		who = "the sessions"
	}
	if g.json {
		if err := printJSON(g.stdout, inspectReady{URL: url, Token: token, Tenant: c.Tenant()}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "inspector of %s on %s (Ctrl-C stops)\n", who, url)
		if token != "" {
			fmt.Fprintf(g.stdout, "log in with the token %s\n", token)
		}
	}

	select {
	case err := <-served:
		return errorf(exitFailed, "", "inspect: serving %s: %v", url, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), inspectShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if !g.json {
		fmt.Fprintln(g.stdout, "stopped")
	}
	return nil
}

// inspectReady is what `tahctl --json inspect` prints once it serves.
type inspectReady struct {
	URL    string `json:"url"`
	Token  string `json:"token,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// inspectToken is the login token for listen: none on a loopback address
// (inspector.Loopback), else --token-file's, else a new one.
func inspectToken(listen, file string) (string, error) {
	if inspector.Loopback(listen) {
		if file != "" {
			return "", usageError("drop --token-file, or --listen on an address others reach", "--token-file is for an address that is not loopback: %s needs no login", listen)
		}
		return "", nil
	}
	if file == "" {
		return rand.Text(), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usageError("give a file that holds the token", "--token-file %s: %v", file, errors.Unwrap(err))
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minInspectToken {
		return "", usageError("write a longer token there", "--token-file %s holds fewer than %d characters", file, minInspectToken)
	}
	return token, nil
}
