package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tah-dev/tah/llm"
)

// ToolApprovalRequestedData is the payload of tool.approval-requested.
type ToolApprovalRequestedData struct {
	// Turn is the turn whose calls wait.
	Turn int `json:"turn"`
	// Calls are the calls that need approval, as the model asked for them.
	Calls []llm.ToolCall `json:"calls" jsonschema:"minItems=1"`
	// Deadline, when set, is when the calls still undecided are denied.
	Deadline time.Time `json:"deadline,omitzero"`
}

func (d ToolApprovalRequestedData) validate() error {
	if d.Turn < 1 {
		return errors.New("turn is below 1")
	}
	if len(d.Calls) == 0 {
		return errors.New("no call")
	}
	for i, c := range d.Calls {
		if c.ID == "" || c.Name == "" {
			return fmt.Errorf("call %d has no id or name", i)
		}
	}
	return nil
}

// ToolApprovedData is the payload of tool.approved.
type ToolApprovedData struct {
	CallID string `json:"call_id"`
	// By says who approved, as the approving client said (the input's by):
	// informative, not authenticated by the node.
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
	// Arguments, when set, replace the model's arguments of the call: the
	// call runs with them (its tool.started records them).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

func (d ToolApprovedData) validate() error {
	if d.CallID == "" {
		return errors.New("call_id is empty")
	}
	if len(d.Arguments) > 0 && !json.Valid(d.Arguments) {
		return errors.New("arguments are not JSON")
	}
	return nil
}

// ToolDeniedData is the payload of tool.denied.
type ToolDeniedData struct {
	CallID string `json:"call_id"`
	// By says who denied, as the denying client said; empty when the
	// deadline denied the call (Expired).
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
	// Expired is set when nobody decided before the request's deadline.
	Expired bool `json:"expired,omitempty"`
}

func (d ToolDeniedData) validate() error {
	if d.CallID == "" {
		return errors.New("call_id is empty")
	}
	return nil
}

// DeniedOutput is the result the model sees of a call that was denied.
func DeniedOutput(d ToolDeniedData) string {
	switch {
	case d.Expired:
		return "denied: nobody approved the call before its deadline; it did not run"
	case d.Note != "":
		return "denied by the user: " + d.Note
	}
	return "denied by the user; the call did not run"
}
