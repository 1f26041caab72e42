package inspector

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/client"
)

//go:embed assets
var assets embed.FS

// Errors of New.
var (
	// ErrNoClient: Options.Client is nil; the inspector reads and acts
	// through a client connection of its own.
	ErrNoClient = errors.New("inspector: no client")
)

// Options configure the inspector.
type Options struct {
	// Client is the inspector's connection to TAH: a client credential of its
	// own (never the node's), so that NATS's permissions hold for it.
	Client *client.Client
	// Token, when set, is required to log in (the HTTP address is not
	// loopback); empty serves only loopback hosts, without a login.
	Token string
	// TokenHint says where the token is, on the login page (a file's path).
	TokenHint string
	// Logger gets the errors no page shows; nil discards them.
	Logger *slog.Logger
}

// Handler serves the inspector: the pages, their live updates and actions.
type Handler struct {
	c     *client.Client
	opts  Options
	pages *template.Template
	mux   *http.ServeMux
	log   *slog.Logger
	// streams counts the live streams open (LiveStreams).
	streams atomic.Int64
}

// LiveStreams is how many pages' live streams are open now: each an HTTP
// connection held, and a follower of a session's log.
func (h *Handler) LiveStreams() int64 { return h.streams.Load() }

// How long the inspector waits for TAH.
const (
	// readTimeout bounds a page's reads.
	readTimeout = 15 * time.Second
	// settle is how long an action that starts a turn waits for it to be
	// refused (a busy session, say) before it shows the turn running.
	settle = 1500 * time.Millisecond
	// commandTimeout bounds cancel, fork and compact (a summary is one LLM
	// call).
	commandTimeout = 2 * time.Minute
)

// New makes the inspector's handler.
func New(opts Options) (*Handler, error) {
	if opts.Client == nil {
		return nil, ErrNoClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h := &Handler{c: opts.Client, opts: opts, pages: pages, mux: http.NewServeMux(), log: opts.Logger}
	static, _ := fs.Sub(assets, "assets/static")
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", cached(http.FileServerFS(static))))
	h.mux.HandleFunc("GET /login", h.loginPage)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("GET /{$}", h.list)
	h.mux.HandleFunc("GET /rows", h.rows)
	h.mux.HandleFunc("POST /new", h.newSession)
	h.mux.HandleFunc("GET /s/{sid}", h.session)
	h.mux.HandleFunc("GET /s/{sid}/live", h.live)
	h.mux.HandleFunc("GET /s/{sid}/events", h.events)
	h.mux.HandleFunc("GET /s/{sid}/request/{step}", h.request)
	h.mux.HandleFunc("GET /s/{sid}/artifacts/{art}", h.artifact)
	h.mux.HandleFunc("POST /s/{sid}/send", h.send)
	h.mux.HandleFunc("POST /s/{sid}/resume", h.resume)
	h.mux.HandleFunc("POST /s/{sid}/cancel", h.cancel)
	h.mux.HandleFunc("POST /s/{sid}/approve", h.approve)
	h.mux.HandleFunc("POST /s/{sid}/deny", h.deny)
	h.mux.HandleFunc("POST /s/{sid}/compact", h.compact)
	h.mux.HandleFunc("POST /s/{sid}/fork", h.fork)
	h.mux.HandleFunc("POST /s/{sid}/replay", h.replaySession)
	return h, nil
}

// parsePages parses the embedded templates.
func parsePages() (*template.Template, error) {
	return template.New("pages").Funcs(funcs).ParseFS(assets, "assets/*.html")
}

// ServeHTTP checks access (access.go), then serves the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w)
	if !h.allowed(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// cached lets the browser keep the embedded files for an hour: they change
// only with the binary, and the pages link them with assetVersion, so that
// a newer binary's are fetched at once.
func cached(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// assetVersion is a digest of the embedded static files, in their links
// (?v=): a browser's cached copy of an older binary's is not used.
var assetVersion = func() string {
	h := sha256.New()
	_ = fs.WalkDir(assets, "assets/static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := assets.ReadFile(path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()
