package inspector

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// sessionView is a session's page: its state, its turns and their steps.
type sessionView struct {
	ID     string
	State  *projection.State
	Blocks []blockView
	// FoldError is where the fold stopped agreeing with the log.
	FoldError string
	Flash     flash
}

// blockView is a block with its steps as the state has them now.
type blockView struct {
	*block
	Session string
	Items   []itemView
	// Tokens is the turn's usage: its end's, or so far for the running turn;
	// nil for notes, or a turn that ended without one (a crash).
	Tokens *llm.Usage
}

type itemView struct {
	Step *projection.Step // nil for a note
	Note string
	// Artifacts are those the step produced, to download.
	Artifacts []projection.Artifact
}

// view resolves b's steps in t's state (copies: the state goes on changing
// while a live update renders).
func (t *timeline) view(b *block) blockView {
	v := blockView{block: b, Session: t.state.ID, Items: make([]itemView, 0, len(b.Items))}
	switch {
	case b.Ended:
		v.Tokens = &b.Usage
	case b.Turn > 0 && b == t.current() && t.state.Status.Active():
		u := t.state.TurnUsage
		v.Tokens = &u
	}
	for _, it := range b.Items {
		if it.StepID == "" {
			v.Items = append(v.Items, itemView{Note: it.Note})
			continue
		}
		if st := t.state.Step(it.StepID); st != nil {
			c := *st
			v.Items = append(v.Items, itemView{Step: &c, Artifacts: t.artifactsOf(st.ID)})
		}
	}
	return v
}

// artifactsOf are the artifacts step id produced.
func (t *timeline) artifactsOf(id string) []projection.Artifact {
	var arts []projection.Artifact
	for _, a := range t.state.Artifacts {
		if a.StepID == id {
			arts = append(arts, a)
		}
	}
	return arts
}

// headView is the session without its blocks: its page's header.
func (t *timeline) headView(sid string) sessionView {
	v := sessionView{ID: sid, State: &t.state}
	if t.foldErr != nil {
		v.FoldError = t.foldErr.Error()
	}
	return v
}

func (t *timeline) sessionView(sid string) sessionView {
	v := t.headView(sid)
	v.Blocks = make([]blockView, 0, len(t.blocks))
	for _, b := range t.blocks {
		v.Blocks = append(v.Blocks, t.view(b))
	}
	return v
}

// session is a session's page.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	t, err := load(ctx, h.c, sid)
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	v := t.sessionView(sid)
	v.Flash = flashOf(r)
	h.render(w, r, http.StatusOK, "session.html", sid, v)
}

// request shows the exact request an LLM step sent, rebuilt from the log
// (tah.api.request), as JSON.
func (h *Handler) request(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	rep, err := h.c.StepRequest(ctx, r.PathValue("sid"), r.PathValue("step"))
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	b, err := json.MarshalIndent(rep.Request, "", "  ")
	if err != nil {
		h.failPage(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "request.html", "Request", requestView{RequestReply: rep, JSON: string(b)})
}

type requestView struct {
	wire.RequestReply
	JSON string
}
