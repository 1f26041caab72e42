package inspector

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/event"
)

// eventsPage is how many events the log view shows at a time; a page ends
// with a whole record, so it may hold a few more.
const eventsPage = 200

// eventsView is a session's log, event by event: a page of the events of
// one type (Type: "llm.completed"), of a family ("tool."), or of every
// type, from sequence From.
type eventsView struct {
	ID   string
	Type string
	// Types are the filter's choices: each family, then each type.
	Types []string
	Rows  []eventRow
	From  uint64
	// Next is the From of the next page; 0 on the last.
	Next uint64
	// Read counts the events read for this page, matching or not.
	Read int
}

// eventRow is an event with its data indented; Multi is set when its
// record holds other events (it is then named seq.index).
type eventRow struct {
	event.Event
	JSON  string
	Multi bool
}

// events is the log view of a session (the header's Events count links to
// it).
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	sid, q := r.PathValue("sid"), r.URL.Query()
	v := eventsView{ID: sid, Type: q.Get("type"), Types: eventTypes()}
	v.From, _ = strconv.ParseUint(q.Get("from"), 10, 64)
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	err := readLog(ctx, h.c, sid, v.From, eventsPage, func(evs []event.Event, last uint64) bool {
		for i, e := range evs {
			v.Read++
			if !typeMatches(e.Type, v.Type) {
				continue
			}
			multi := e.Index > 0 || (i+1 < len(evs) && evs[i+1].Seq == e.Seq)
			v.Rows = append(v.Rows, eventRow{Event: e, JSON: pretty(e.Data), Multi: multi})
		}
		if len(v.Rows) >= eventsPage {
			if end := evs[len(evs)-1].Seq; end < last {
				v.Next = end + 1
			}
			return false
		}
		return true
	})
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "events.html", "Events of "+sid, v)
}

// typeMatches reports whether an event of type t passes the filter: empty
// (every type), a family ending in "." (its prefix), or the type itself.
func typeMatches(t event.Type, filter string) bool {
	if filter == "" {
		return true
	}
	if strings.HasSuffix(filter, ".") {
		return strings.HasPrefix(string(t), filter)
	}
	return string(t) == filter
}

// eventTypes are the filter's choices: the families of event.Types ("llm."),
// then the types.
func eventTypes() []string {
	var families, types []string
	for _, t := range event.Types() {
		types = append(types, string(t))
		if f, _, ok := strings.Cut(string(t), "."); ok && !slices.Contains(families, f+".") {
			families = append(families, f+".")
		}
	}
	return append(families, types...)
}
