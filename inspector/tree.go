package inspector

import (
	"context"
	"strings"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// A session's place in its tree of sub-agents (actors/session/subagents.go):
// its parent comes from its own log (projection.State.Parent); its children
// from its log's steps (a sub-agent call's step names its child) and the
// read model (tah.api.get: each child's status, and the totals of the whole
// tree), which may not list a child its log has just named.

// treeLimit is how many sessions a page reads (tah.api.get, one each) to draw
// a tree of sub-agents: a larger tree is cut, and says how many it leaves out.
const treeLimit = 50

// agentToolPrefix starts a sub-agent's tool name (session.AgentToolPrefix:
// the page names a child's agent from its call while the read model does not
// list it yet; the UI does not depend on the actors for one constant).
const agentToolPrefix = "agent_"

// treeView is a session's sub-agents as its page shows them.
type treeView struct {
	// Totals is what the tree (the session and all its descendants) used
	// and cost; nil when the read model was not read.
	Totals *wire.TreeTotals
	// Children are the session's sub-agents' sessions, each with its own.
	Children []childView
	// Unread counts the sessions the totals count that are not shown (past
	// treeLimit, or a read that failed).
	Unread int
	// Err is why the session's children could not be read: those its log
	// names are shown, without a status.
	Err string
}

// childView is a sub-agent's session in a tree.
type childView struct {
	wire.ChildSummary
	// Parent is the session whose call made it.
	Parent   string
	Children []childView
	// Err is why its own children could not be read.
	Err string
}

// tree reads session st's sub-agents, nil when its log names none (no read
// then: most sessions have none). It is bounded by statusTimeout: a page
// is shown with what was read rather than late.
func (h *Handler) tree(ctx context.Context, st *projection.State) *treeView {
	steps := childSteps(st)
	if len(steps) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	v := &treeView{}
	s, err := h.c.Get(ctx, st.ID)
	if err != nil {
		h.log.Debug("inspector: the tree of sub-agents", "session", st.ID, "err", err)
		v.Err = err.Error()
	}
	v.Children = mergeChildren(st.ID, steps, s.Children)
	if v.Totals = s.Tree; v.Totals == nil {
		return v
	}
	r := treeReader{h: h, left: treeLimit - 1}
	r.fill(ctx, v.Children, v.Totals.Sessions-1-len(v.Children))
	v.Unread = max(0, v.Totals.Sessions-1-count(v.Children))
	return v
}

// childSteps are st's sub-agent calls, in its log's order.
func childSteps(st *projection.State) []projection.Step {
	var out []projection.Step
	for _, s := range st.Steps {
		if s.Type == projection.StepTool && s.Child != "" {
			out = append(out, s)
		}
	}
	return out
}

// mergeChildren are parent's children: those its log names (steps), with
// the read model's status, then any the read model lists that the log does
// not (a log folded only so far).
func mergeChildren(parent string, steps []projection.Step, read []wire.ChildSummary) []childView {
	byID := make(map[string]wire.ChildSummary, len(read))
	for _, c := range read {
		byID[c.ID] = c
	}
	out := make([]childView, 0, max(len(steps), len(read)))
	seen := map[string]bool{}
	for _, s := range steps {
		if seen[s.Child] {
			continue
		}
		seen[s.Child] = true
		c, ok := byID[s.Child]
		if !ok {
			c = wire.ChildSummary{ID: s.Child, Agent: strings.TrimPrefix(s.Tool, agentToolPrefix), CallID: s.CallID}
		}
		out = append(out, childView{ChildSummary: c, Parent: parent})
	}
	for _, c := range read {
		if !seen[c.ID] {
			out = append(out, childView{ChildSummary: c, Parent: parent})
		}
	}
	return out
}

// treeReader reads the levels below a session's children, at most left
// sessions more.
type treeReader struct {
	h    *Handler
	left int
}

// fill reads the children of kids while the totals say more sessions are
// below them than were found: a tree one level deep costs no read beyond
// the session's own.
func (r *treeReader) fill(ctx context.Context, kids []childView, more int) {
	for i := range kids {
		if more <= 0 || r.left <= 0 {
			return
		}
		r.left--
		s, err := r.h.c.Get(ctx, kids[i].ID)
		if err != nil {
			kids[i].Err = err.Error()
			continue
		}
		if s.Tree == nil { // no children
			continue
		}
		for _, c := range s.Children {
			kids[i].Children = append(kids[i].Children, childView{ChildSummary: c, Parent: kids[i].ID})
		}
		more -= s.Tree.Sessions - 1
		r.fill(ctx, kids[i].Children, s.Tree.Sessions-1-len(s.Children))
	}
}

// count counts the sessions of kids and below.
func count(kids []childView) int {
	n := len(kids)
	for _, k := range kids {
		n += count(k.Children)
	}
	return n
}

// changesTree reports whether e may change what a session's tree shows:
// a sub-agent's call started or ended, or the turn that made them ended.
func changesTree(t *timeline, e event.Event) bool {
	if !t.hasChildren {
		return false
	}
	switch e.Type {
	case event.ToolStarted, event.ToolFinished, event.AgentFinished, event.AgentFailed, event.AgentCancelled:
		return true
	}
	return false
}
