package inspector

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/tah-dev/tah/client"
)

// flash is the outcome of the last action, carried by the redirect that
// follows it (?ok=... or ?err=..., and the error's code in ?code=...).
type flash struct {
	OK   string
	Err  string
	Code string
}

func flashOf(r *http.Request) flash {
	q := r.URL.Query()
	return flash{OK: q.Get("ok"), Err: q.Get("err"), Code: q.Get("code")}
}

// errFlash says that an action failed: what (prefixed with what was done,
// when not empty) and the code of a command a node refused or could not
// carry out (a *client.CommandError: unknown_session, busy,
// input_too_large, ...).
func errFlash(what string, err error) flash {
	f := flash{Err: err.Error()}
	if what != "" {
		f.Err = what + ": " + f.Err
	}
	var ce *client.CommandError
	if errors.As(err, &ce) {
		f.Code = ce.Code
	}
	return f
}

// redirect sends the browser to path with the outcome of an action.
func redirect(w http.ResponseWriter, r *http.Request, path string, f flash) {
	q := url.Values{}
	if f.OK != "" {
		q.Set("ok", f.OK)
	}
	if f.Err != "" {
		q.Set("err", f.Err)
	}
	if f.Code != "" {
		q.Set("code", f.Code)
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// statusOf is the HTTP status of an error of package client.
func statusOf(err error) int {
	switch {
	case errors.Is(err, client.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, client.ErrBadRequest), errors.Is(err, client.ErrMalformedInput):
		return http.StatusBadRequest
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrBusy):
		return http.StatusConflict
	case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

// failPage shows an error where the page would have been.
func (h *Handler) failPage(w http.ResponseWriter, r *http.Request, err error) {
	h.render(w, r, statusOf(err), "error.html", "Error", err.Error())
}
