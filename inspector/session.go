package inspector

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
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
	// Tree is the session's sub-agents (tree.go); nil without any.
	Tree  *treeView
	Flash flash
}

// CanCancel reports whether Cancel turn applies: a turn is in progress.
func (v sessionView) CanCancel() bool { return canCancel(v.State) }

// CanResume reports whether Resume applies: a turn was left unfinished (the
// node resumes only an active session; one running on a node now is
// refused as busy, without a write).
func (v sessionView) CanResume() bool { return canResume(v.State) }

// CanCompact reports whether Compact applies: no turn runs, and a turn
// since the last summary is there to compact.
func (v sessionView) CanCompact() bool { return canCompact(v.State) }

// Budget is the session's limits in force with their spend, the one its
// last turn stopped at marked (budget.go); nil without a budget.
func (v sessionView) Budget() *budgetView { return budgetOf(wire.BudgetOf(v.State), time.Now()) }

// CanSteer reports whether "Steer this turn" and "Interrupt and send"
// apply: a turn is in progress (running, or waiting for its tools or an
// approval). On an idle session the node would run either as a turn of
// its own, what Send does.
func (v sessionView) CanSteer() bool { return canSteer(v.State) }

func canCancel(s *projection.State) bool { return s.Status.Active() }
func canSteer(s *projection.State) bool  { return s.Status.Active() }
func canResume(s *projection.State) bool { return s.Status.Active() }

// canCompact is projection.PlanCompaction's test of a manual compaction (a
// turn's start since the last summary: a steer starts none) without
// building its transcript.
func canCompact(s *projection.State) bool {
	if s.Status.Active() || s.Fault != nil {
		return false
	}
	for i := len(s.Messages) - 1; i >= 0 && !projection.IsSummary(s.Messages[i]); i-- {
		if s.Messages[i].StartsTurn() {
			return true
		}
	}
	return false
}

// blockView is a block with its steps as the state has them now.
type blockView struct {
	*block
	Session string
	Items   []itemView
	// Tokens is the turn's usage: its end's, or so far for the running turn;
	// nil for notes, or a turn that ended without one (a crash). Cost is the
	// turn's cost, the same way.
	Tokens *llm.Usage
	Cost   *pricing.Cost
	// Span is the time its waterfall covers (waterfall.go).
	Span time.Duration
}

type itemView struct {
	Step *projection.Step // nil for a note or a steer
	Note string
	// Steer is a user's message that joined the running turn (turn.steered).
	Steer *steer
	// At is when the note was logged; Summary the summary of a compaction
	// noted without a step.
	At      time.Time
	Summary string
	// Artifacts are those the step produced, to download.
	Artifacts []projection.Artifact
	// Bar is the step's place in its block's waterfall.
	Bar bar
	// LLM steps: Model answered (or was asked, before an answer), on Node,
	// whose provider is Provider (empty when that node is not alive now);
	// Summary, for a compaction, is what it wrote; InFlight is set when the
	// step streamed before the page was read (its first tokens are not on
	// the page).
	Model, Node, Provider string
	InFlight              bool
}

// view resolves b's steps in t's state (copies: the state goes on changing
// while a live update renders).
func (t *timeline) view(b *block) blockView {
	v := blockView{block: b, Session: t.state.ID, Items: make([]itemView, 0, len(b.Items))}
	switch {
	case b.Ended:
		v.Tokens, v.Cost = &b.Usage, &b.Cost
	case b.Turn > 0 && b == t.current() && t.state.Status.Active():
		u, c := t.state.TurnUsage, t.state.TurnCost
		v.Tokens, v.Cost = &u, &c
	}
	for _, it := range b.Items {
		if it.StepID == "" {
			v.Items = append(v.Items, itemView{Note: it.Note, At: it.At, Summary: it.Summary, Steer: it.Steer})
			continue
		}
		if st := t.state.Step(it.StepID); st != nil {
			c := *st
			iv := itemView{Step: &c, Artifacts: t.artifactsOf(st.ID)}
			if c.Type == projection.StepLLM {
				iv.Model, iv.Node = modelOf(&c), t.stepNodes[c.ID]
				iv.Provider = t.providers[iv.Node]
				iv.Summary = t.summaries[c.ID]
				iv.InFlight = t.inFlight[c.ID] && !c.Status.Done()
			}
			v.Items = append(v.Items, iv)
		}
	}
	waterfall(&v, v.Items, time.Now())
	return v
}

// Runs names what ran an LLM step: its model and provider, those known.
func (v itemView) Runs() string {
	switch {
	case v.Model == "" || v.Model == v.Provider: // the mock names its model after itself
		return v.Provider
	case v.Provider == "":
		return v.Model
	}
	return v.Model + " · " + v.Provider
}

// modelOf is the model that answered an LLM step, or the one it asked.
func modelOf(st *projection.Step) string {
	if st.Response != nil && st.Response.Model != "" {
		return st.Response.Model
	}
	if st.RequestRef != nil {
		return st.RequestRef.Model
	}
	return ""
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
	v := sessionView{ID: sid, State: &t.state, Tree: t.tree}
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
	t.markInFlight()
	t.providers = h.providers(ctx)
	t.tree = h.tree(ctx, &t.state)
	v := t.sessionView(sid)
	v.Flash = flashOf(r)
	h.render(w, r, http.StatusOK, "session.html", sid, v)
}

// statusTimeout bounds the status read that names the nodes' providers: a
// page is shown without them rather than late.
const statusTimeout = 3 * time.Second

// providers are the LLM providers of the nodes alive now, by node id
// (tah.api.status: the answering node's and tah_nodes'); nil when the
// status cannot be read: steps then show their node without a provider.
// A node that is gone has no entry: the log does not record providers.
func (h *Handler) providers(ctx context.Context) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := h.c.Status(ctx)
	if err != nil {
		h.log.Debug("inspector: status for the providers", "err", err)
		return nil
	}
	m := map[string]string{st.Node: st.Provider}
	for _, n := range st.Nodes {
		if n.Provider != "" {
			m[n.Node] = n.Provider
		}
	}
	return m
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
