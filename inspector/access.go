package inspector

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The cookies of the inspector: both HttpOnly and SameSite=Strict, so that
// no other site's page sends them along.
const (
	// loginCookie proves the login: an HMAC of a fixed text keyed with the
	// token (the token itself never travels back), valid until the token
	// changes.
	loginCookie = "tah_login"
	// csrfCookie is the double-submitted CSRF token: every form posts it
	// back in the field csrfField, which another site cannot read.
	csrfCookie = "tah_csrf"
	csrfField  = "csrf"
)

// secureHeaders forbid framing, sniffing, and any script or style not
// served by the inspector itself.
func secureHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// allowed decides access before any page: loopback hosts only without a
// token (a guard against DNS rebinding), the login cookie with one, and for
// a POST the same origin and the CSRF token. It writes the refusal itself.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Token == "" && !Loopback(r.Host) {
		http.Error(w, "this inspector serves loopback addresses only (open it as http://127.0.0.1:PORT/); to serve others, give the node a non-loopback --http address: it then asks for a login", http.StatusForbidden)
		return false
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		http.Error(w, "refused: the request comes from another site's page (Origin "+r.Header.Get("Origin")+")", http.StatusForbidden)
		return false
	}
	public := strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/login"
	if !public && h.opts.Token != "" && !h.loggedIn(r) {
		if r.Method == http.MethodGet && acceptsHTML(r) {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		} else {
			http.Error(w, "log in first: open /login", http.StatusUnauthorized)
		}
		return false
	}
	if r.Method == http.MethodPost && !validCSRF(r) {
		http.Error(w, "refused: the form's CSRF token is missing or stale; reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}

// Loopback reports whether host (host or host:port: a request's Host, a
// listening address) names this machine only: localhost or a loopback
// address. An empty host (":9464", every interface) does not.
func Loopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether a POST comes from the inspector's own pages:
// its Origin (sent by every browser on a POST) names the request's host. A
// request without Origin is not a browser's cross-site form.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func acceptsHTML(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return a == "" || strings.Contains(a, "text/html") || strings.Contains(a, "*/*")
}

// loginProof is the login cookie's value for token.
func loginProof(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("tah inspector login"))
	return hex.EncodeToString(m.Sum(nil))
}

func (h *Handler) loggedIn(r *http.Request) bool {
	c, err := r.Cookie(loginCookie)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(loginProof(h.opts.Token)))
}

func validCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) == 1
}

// csrfToken is the browser's CSRF token, set as a cookie when it has none.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 26 {
		return c.Value
	}
	v := rand.Text()
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return v
}

// loginPage asks for the token.
func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login.html", "Log in", loginView{Next: safeNext(r.URL.Query().Get("next")), Hint: h.opts.TokenHint})
}

// login checks the token and sets the login cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	if h.opts.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(r.PostFormValue("token"))), []byte(h.opts.Token)) != 1 {
		h.render(w, r, http.StatusUnauthorized, "login.html", "Log in", loginView{Next: next, Hint: h.opts.TokenHint, Wrong: true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: loginProof(h.opts.Token), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a redirect after login on the inspector: a path, never
// another site ("//evil", "https://...").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

type loginView struct {
	Next  string
	Hint  string
	Wrong bool
}
