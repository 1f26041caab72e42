package nodecmd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/inspector"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// uiTokenFile is, in the data directory, the token that logs in to the UI
// when the HTTP address is not loopback (mode 0600, generated once).
const uiTokenFile = "ui.token"

// minTokenLen is the shortest login token the UI takes from ui.token.
const minTokenLen = 16

// uiName is the name of the UI's credential (its inbox is _INBOX_ui.).
const uiName = "ui"

// ui is the step inspector as the node serves it: its handler, its own
// client connection, and what the banner says of it.
type ui struct {
	handler http.Handler
	c       *client.Client
	// login is the token's file when a login is required, empty otherwise.
	login string
	// off says why the UI is not served (the handler says it too).
	off string
}

// startUI connects the inspector to the node with a credential of the client
// role of its own (<data>/ui.creds: issued here for an embedded server; put
// there by the operator for an external NATS), never the node's. A UI that
// cannot start leaves the node running: its page says why.
func startUI(ctx context.Context, cfg config.Config, natsURL string, log *slog.Logger) *ui {
	u, err := openUI(ctx, cfg, natsURL)
	if err != nil {
		log.Warn("the web UI is off", "err", err)
		msg := "The TAH node runs, but its web UI is off: " + err.Error() + ". /metrics and /healthz are served.\n"
		return &ui{off: err.Error(), handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, msg, http.StatusServiceUnavailable)
		})}
	}
	return u
}

func openUI(ctx context.Context, cfg config.Config, natsURL string) (*ui, error) {
	creds := auth.UICredsPath(cfg.DataDir)
	if cfg.NATS.URL == "" {
		t, err := auth.Load(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
		if err := t.EnsureCreds(creds, wire.RoleClient, uiName); err != nil {
			return nil, fmt.Errorf("its credential: %w", err)
		}
	} else if _, err := os.Stat(creds); err != nil {
		return nil, fmt.Errorf("with an external NATS, put a credential of the client role named %q at %s (docs/operations.md, \"The web UI\")", uiName, creds)
	}
	u := &ui{}
	token := ""
	if !inspector.Loopback(cfg.HTTP) {
		var err error
		if token, u.login, err = uiToken(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("its login token: %w", err)
		}
	}
	c, err := client.Connect(ctx, client.Options{URL: natsURL, CredsFile: creds, TLSCAFile: cfg.NATS.TLSCA, Name: "tah-node " + cfg.NodeID + " ui"})
	if err != nil {
		return nil, fmt.Errorf("connect with %s: %w", creds, err)
	}
	h, err := inspector.New(inspector.Options{Client: c, Token: token, TokenHint: u.login})
	if err != nil {
		c.Close()
		return nil, err
	}
	u.c, u.handler = c, h
	return u, nil
}

// close closes the UI's connection.
func (u *ui) close() {
	if u.c != nil {
		u.c.Close()
	}
}

// uiToken reads the UI's login token from the data directory (an operator
// may write their own, of minTokenLen characters at least), generating it at
// first.
func uiToken(dataDir string) (token, path string, err error) {
	path = filepath.Join(dataDir, uiTokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(strings.TrimSpace(string(b))) < minTokenLen:
		return "", path, fmt.Errorf("%s holds fewer than %d characters: write a longer token there, or delete it for a new one", path, minTokenLen)
	case err == nil:
		return strings.TrimSpace(string(b)), path, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", path, err
	}
	token = rand.Text()
	if err := localnode.WriteAtomic(path, []byte(token+"\n"), 0o600); err != nil {
		return "", path, err
	}
	return token, path, nil
}
