package inspector

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

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

// contentLimit is how many sessions a search reads the messages of
// (tah.api.messages, one request each, newest first), when their title,
// id, last answer and last error do not match: the API has no search, and
// reading every session's history for a search would cost far more.
const contentLimit = 100

// listView is the list page: a page of sessions, its filters, and the
// cursor of the next page.
type listView struct {
	Sessions []wire.SessionSummary
	Status   string
	Q        string
	Next     string
	// Scanned is set after a search that stopped at searchLimit sessions.
	Scanned int
	// Snippets are where a search found its words in a session, by id (none
	// for a match of the title or id); ContentRead counts the sessions whose
	// messages it read, ContentSkipped those it did not (past
	// contentLimit).
	Snippets                    map[string]string
	ContentRead, ContentSkipped int
	Flash                       flash
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

// search finds a session by its id (one get), or by a part of its title,
// its last answer or error, or the messages of its history (reading the
// list, newest first, until a page of matches; the messages of the first
// contentLimit sessions whose row does not match).
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
			if snippet, ok := h.found(ctx, &v, s, want); ok {
				v.Sessions = append(v.Sessions, s)
				if snippet != "" {
					if v.Snippets == nil {
						v.Snippets = map[string]string{}
					}
					v.Snippets[s.ID] = snippet
				}
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

// found reports whether session s holds want (lower case) and where, as a
// snippet (empty for its title or id): its row first, then, for the first
// contentLimit sessions of a search, its messages.
func (h *Handler) found(ctx context.Context, v *listView, s wire.SessionSummary, want string) (string, bool) {
	if strings.Contains(strings.ToLower(s.Title), want) || strings.Contains(s.ID, want) {
		return "", true
	}
	for _, f := range []struct{ name, text string }{{"last answer", s.LastOutput}, {"last error", s.LastError}} {
		if sn, ok := snippet(f.text, want); ok {
			return f.name + ": " + sn, true
		}
	}
	if v.ContentRead >= contentLimit {
		v.ContentSkipped++
		return "", false
	}
	v.ContentRead++
	rep, err := h.c.Messages(ctx, s.ID)
	if err != nil {
		h.log.Debug("inspector: search: messages", "session", s.ID, "err", err)
		return "", false
	}
	for _, m := range rep.Messages {
		if sn, ok := snippet(m.Content, want); ok {
			return string(m.Role) + ": " + sn, true
		}
		for _, c := range m.ToolCalls {
			if sn, ok := snippet(c.Name+" "+string(c.Arguments), want); ok {
				return "tool call: " + sn, true
			}
		}
	}
	return "", false
}

// snippetAround is how much of a text a snippet shows around a match.
const snippetAround = 60

// snippet is the part of text around want (lower case), on one line, when
// text holds it.
func snippet(text, want string) (string, bool) {
	lower := strings.ToLower(text)
	i := strings.Index(lower, want)
	if i < 0 {
		return "", false
	}
	if len(lower) != len(text) { // a case change changed the length: show it lowered
		text = lower
	}
	from, to := max(0, i-snippetAround), min(len(text), i+len(want)+snippetAround)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	s := strings.Join(strings.Fields(text[from:to]), " ")
	if from > 0 {
		s = "…" + s
	}
	if to < len(text) {
		s += "…"
	}
	return s, true
}
