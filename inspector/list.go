package inspector

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// pageSize is how many sessions a page of the list shows.
const pageSize = 50

// searchLimit is how many sessions a search by title reads at most: the API
// lists sessions but does not search them, so a search reads pages of
// wire.ListMax and keeps the matches.
const searchLimit = 20_000

// listView is the list page: a page of sessions, its filters, and the
// cursor of the next page.
type listView struct {
	Sessions []wire.SessionSummary
	Status   string
	Q        string
	Next     string
	// Scanned is set after a search that stopped at searchLimit sessions.
	Scanned int
	Flash   flash
	// Live is where the first page fetches its rows again to stay live
	// (empty on later pages and searches).
	Live string
}

// statuses are the filter's choices.
func statuses() []projection.Status {
	return []projection.Status{projection.StatusIdle, projection.StatusRunning, projection.StatusWaitingTool,
		projection.StatusCompleted, projection.StatusFailed, projection.StatusCancelled, projection.StatusNeedsNewerNode}
}

// list is the sessions page.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	v, err := h.listPage(r)
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "list.html", "Sessions", v)
}

// rows is the list's table body alone: what the page fetches to stay live.
func (h *Handler) rows(w http.ResponseWriter, r *http.Request) {
	v, err := h.listPage(r)
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	s, err := h.fragment("rows", v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(s))
}

func (h *Handler) listPage(r *http.Request) (listView, error) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	q := r.URL.Query()
	v := listView{Status: q.Get("status"), Q: strings.TrimSpace(q.Get("q")), Flash: flashOf(r)}
	status := projection.Status(v.Status)
	if v.Q != "" {
		return h.search(ctx, v, status)
	}
	before := q.Get("before")
	if before == "" {
		v.Live = "/rows?" + url.Values{"status": {v.Status}}.Encode()
	}
	rep, err := h.c.List(ctx, wire.ListRequest{Status: status, Limit: pageSize, Before: before})
	if err != nil {
		return v, err
	}
	v.Sessions, v.Next = rep.Sessions, rep.Next
	return v, nil
}

// search finds a session by its id (one get), or by a part of its title
// (reading the list, newest first, until a page of matches).
func (h *Handler) search(ctx context.Context, v listView, status projection.Status) (listView, error) {
	if wire.ValidSessionID(v.Q) == nil {
		s, err := h.c.Get(ctx, v.Q)
		if err == nil {
			v.Sessions = []wire.SessionSummary{s}
			return v, nil
		}
	}
	want := strings.ToLower(v.Q)
	before, limit := "", wire.ListMax
	for scanned := 0; ; {
		rep, err := h.c.List(ctx, wire.ListRequest{Status: status, Limit: limit, Before: before})
		if errors.Is(err, client.ErrTooLarge) && limit > pageSize {
			limit /= 2 // long configurations: fewer sessions fit in a reply
			continue
		}
		if err != nil {
			return v, err
		}
		for _, s := range rep.Sessions {
			if strings.Contains(strings.ToLower(s.Title), want) || strings.Contains(s.ID, want) {
				v.Sessions = append(v.Sessions, s)
			}
		}
		scanned += len(rep.Sessions)
		if rep.Next == "" || len(v.Sessions) >= pageSize {
			return v, nil
		}
		if scanned >= searchLimit {
			v.Scanned = scanned
			return v, nil
		}
		before = rep.Next
	}
}
