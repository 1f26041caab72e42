package inspector

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

// decidedBy is who decides, as the decision's body says, for a decision
// taken on the page. The node records the name of the inspector's
// credential instead (ui, or tahctl inspect's), which the input's subject
// names; this is kept only where the credential names no sender (one
// issued before inputs did).
const decidedBy = "inspector"

// approve runs a call that waits for approval (the form's call), with the
// form's arguments instead of the model's when they differ (the form shows
// the model's, pretty-printed, to edit), and follows the turn on as a send
// does.
func (h *Handler) approve(w http.ResponseWriter, r *http.Request) {
	d := decisionOf(r)
	if args := strings.TrimSpace(r.PostFormValue("arguments")); args != "" && !sameJSON(args, r.PostFormValue("model_arguments")) {
		d.Arguments = json.RawMessage(args)
	}
	h.decide(w, r, d, func(ctx context.Context, sid string) (*client.Turn, error) { return h.c.Approve(ctx, sid, d) })
}

// deny denies a call that waits for approval: the model is told the form's
// note.
func (h *Handler) deny(w http.ResponseWriter, r *http.Request) {
	d := decisionOf(r)
	h.decide(w, r, d, func(ctx context.Context, sid string) (*client.Turn, error) { return h.c.Deny(ctx, sid, d) })
}

// decide starts the decision's turn, unless the form is not a valid one.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, d wire.Decision, start func(context.Context, string) (*client.Turn, error)) {
	sid := r.PathValue("sid")
	if err := (wire.Input{Command: wire.CommandApprove, Decision: &d}).Validate(); err != nil {
		redirect(w, r, "/s/"+sid, flash{Err: err.Error(), Code: wire.CodeMalformedInput})
		return
	}
	h.startTurn(w, r, sid, func(ctx context.Context) (*client.Turn, error) { return start(ctx, sid) })
}

// decisionOf is the decision a form posts: its call and note.
func decisionOf(r *http.Request) wire.Decision {
	d := wire.Decision{Note: strings.TrimSpace(r.PostFormValue("note")), By: decidedBy}
	if call := r.PostFormValue("call"); call != "" {
		d.Calls = []string{call}
	}
	return d
}

// sameJSON reports whether a and b are the same JSON but for the spaces
// between tokens: the model's arguments, pretty-printed on the form and
// posted back unedited, are no edit (the log would say they were).
func sameJSON(a, b string) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, []byte(a)) != nil || json.Compact(&cb, []byte(b)) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
